"""Planted error: trnsim demo --chip trn0.

Rule: trnsim CLI: checks before it simulates.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: UsageError: --chip 'trn0' is not a chip
# cli: demo --chip trn0 --out {tmp}/demo
