"""Planted error: trnsim view of a file that is no trace.

Rule: trnsim CLI: checks before it simulates.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: UsageError: trace '.*cli_\d+_view_foreign.py': unknown trace format '.py'
# cli: view {file}
