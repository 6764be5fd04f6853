"""Planted error: a float64 input.

Rule: nki-api.md §5A.1 (no float64 on the device).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: float64 is not a device dtype
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    pass


nki.simulate(kernel)(np.ones((4, 4)))  # ERROR
