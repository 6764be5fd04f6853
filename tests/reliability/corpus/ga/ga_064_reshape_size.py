"""Planted error: a reshape that changes the element count.

Rule: nki-api.md §4.1 reshape.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: reshape of tensor 'arg0': cannot reshape \[128, 512\] \(65536 elements\) into \[3, 5\]
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    b = a.reshape((3, 5))  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
