"""Planted error: trnsim view of a missing trace.

Rule: trnsim CLI: checks before it simulates.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: UsageError: trace '.*none.pftrace': no such file
# cli: view {tmp}/none.pftrace
