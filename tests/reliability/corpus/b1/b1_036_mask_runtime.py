"""Planted error: a mask on a runtime value.

Rule: §11 err_unsupported_expression_in_mask.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: mask= must be an affine comparison.*err_unsupported_expression_in_mask
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):
    t = nl.load(a)
    u = nl.exp(t, mask=(t > 0))  # ERROR
    return a


nki.jit(kernel)(np.ones((128, 512), np.float32))
