"""Planted error: a what-if clock not in whole MHz.

Rule: chip files: clocks in whole MHz.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: SpecError: is not a whole number of MHz
import trnsim


trnsim.load_chip('trn2', engines__vector__clock_ghz=0.9605)
