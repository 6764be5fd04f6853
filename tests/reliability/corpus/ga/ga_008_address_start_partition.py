"""Planted error: an explicit address breaking the start-partition rule.

Rule: nki-api.md §3.5.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: nl.ndarray: address partition offset 16 for a tensor of 64 partitions; it must be 0 or 64
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((64, 4), nl.float32, buffer=nl.sbuf, address=(16, 0))  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
