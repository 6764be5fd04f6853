"""Planted error: nc_matmul with a 256-wide stationary.

Rule: §11 err_size_of_dimension_exceed_arch_limit.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: exceed architecture limitation of 128
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):
    s = nl.load(a[0:128, 0:256])
    m = nl.load(a[0:128, 0:512])
    p = nisa.nc_matmul(s, m)  # ERROR
    return a


nki.jit(kernel)(np.ones((128, 512), np.float32))
