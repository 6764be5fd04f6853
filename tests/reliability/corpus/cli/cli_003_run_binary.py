"""Planted error: trnsim run on a binary file.

Rule: trnsim CLI: checks before it simulates.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: UsageError: not a Python script \(binary content\)
# cli: run {binary}
