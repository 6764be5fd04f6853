"""Planted error: indexing with a 1-D arange.

Rule: §11 err_1d_arange_not_supported.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: indexed with a 1-D nl.arange is not supported.*err_1d_arange_not_supported
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):
    i = nl.arange(128)
    t = nl.load(a[i])  # ERROR
    return t


nki.jit(kernel)(np.ones((128, 512), np.float32))
