"""Planted error: trnsim view of a folder.

Rule: trnsim CLI: checks before it simulates.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: UsageError: trace '.*' is a directory, not a file
# cli: view {tmp}
