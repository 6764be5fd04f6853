"""Planted error: a what-if chip with an infinite clock.

Rule: chip files: finite numbers.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: SpecError: expected a finite number, got inf
import trnsim


trnsim.load_chip('trn2', engines__tensor__clock_ghz=float('inf'))
