"""Planted error: trnsim run on a missing script.

Rule: trnsim CLI: checks before it simulates.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: UsageError: script '.*missing.py': no such file
# cli: run {dir}/missing.py
