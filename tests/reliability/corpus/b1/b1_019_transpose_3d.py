"""Planted error: nl.transpose of a 3-D tile.

Rule: §11 err_exceed_max_supported_dimension.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: exceed max supported number of dimensions of 2.*err_exceed_max_supported_dimension
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):
    t = nl.load(a.reshape((128, 8, 64)))
    u = nl.transpose(t)  # ERROR
    return a


nki.jit(kernel)(np.ones((128, 512), np.float32))
