"""Planted error: trnsim diff with a missing trace.

Rule: trnsim CLI: checks before it simulates.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: UsageError: trace '.*a.pftrace': no such file
# cli: diff {tmp}/a.pftrace {tmp}/b.pftrace
