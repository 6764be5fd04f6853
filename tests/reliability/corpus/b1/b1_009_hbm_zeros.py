"""Planted error: nl.zeros in HBM.

Rule: §11 err_hbm_tensor_with_init_value_not_supported.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: Creating HBM tensor with init value is not supported.*err_hbm_tensor_with_init_value_not_supported
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):
    o = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)  # ERROR
    return o


nki.jit(kernel)(np.ones((128, 512), np.float32))
