"""Planted error: trnsim view of a JSON file that is no trace.

Rule: trnsim CLI: checks before it simulates.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: UsageError: trace '.*other.json' is not a Chrome trace \(no 'traceEvents' list\)
# cli: view {json}
