"""Planted error: a reshape that changes the element count.

Rule: nki-api.md §4.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: reshape of tensor 'a': cannot reshape \[128, 512\] \(65536 elements\) into \[3, 5\]
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):
    b = a.reshape((3, 5))  # ERROR
    return a


nki.jit(kernel)(np.ones((128, 512), np.float32))
