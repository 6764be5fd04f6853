"""Planted error: nl.matmul of mismatched shapes.

Rule: nki-api.md §8 nl.matmul.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: nl.matmul: contraction dimensions differ.*err_param_shape_incompatible_with_matmul
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):
    x = nl.load(a[0:128, 0:128])
    y = nl.load(a[0:64, 0:128])
    z = nl.matmul(x, y, transpose_x=True)  # ERROR
    return a


nki.jit(kernel)(np.ones((128, 512), np.float32))
