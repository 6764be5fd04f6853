"""Planted error: trnsim run on a folder without __main__.py.

Rule: trnsim CLI: checks before it simulates.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: UsageError: is a directory without a __main__.py
# cli: run {dir}
