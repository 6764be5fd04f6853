"""Planted error: affine_range of a float.

Rule: nki-api.md §5 loops (integer bounds).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: loop bound float 2.5 is not an integer
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    for i in nl.affine_range(2.5):  # ERROR
        pass


nki.simulate(kernel)(np.ones((128, 512), np.float32))
