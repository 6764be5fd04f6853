"""Planted error: assigning into an index tensor.

Rule: §11 err_cannot_assign_to_index.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: 'index' tensor does not support item assignment.*err_cannot_assign_to_index
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):
    i = nl.arange(128)[:, None]
    i[0] = 3  # ERROR
    return a


nki.jit(kernel)(np.ones((128, 512), np.float32))
