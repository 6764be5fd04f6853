"""Planted error: a what-if clock of zero.

Rule: chip files: positive clocks.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: SpecError: trn2.yaml: engines.tensor.clock_ghz: must be positive
import trnsim


trnsim.load_chip('trn2', engines__tensor__clock_ghz=0)
