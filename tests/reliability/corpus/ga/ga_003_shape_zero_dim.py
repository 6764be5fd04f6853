"""Planted error: a tensor with a zero dimension.

Rule: nki-api.md §3.3 ndarray.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: nl.ndarray: shape \[128, 0\] has a dimension < 1
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((128, 0), nl.float32, buffer=nl.sbuf)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
