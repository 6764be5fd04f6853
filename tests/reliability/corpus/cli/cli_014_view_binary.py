"""Planted error: trnsim view of a binary .pftrace.

Rule: trnsim CLI: checks before it simulates.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: UsageError: trace '.*blob.pftrace' is truncated or not a Perfetto trace
# cli: view {binary_trace}
