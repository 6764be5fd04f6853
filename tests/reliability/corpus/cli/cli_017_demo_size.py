"""Planted error: trnsim demo --size 100.

Rule: trnsim CLI: checks before it simulates.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: UsageError: --size 100: a positive multiple of 512
# cli: demo --size 100 --out {tmp}/demo
