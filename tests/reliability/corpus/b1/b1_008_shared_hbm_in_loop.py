"""Planted error: shared_hbm created inside a loop.

Rule: §11 err_shared_hbm_must_in_kernel_level.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: err_shared_hbm_must_in_kernel_level
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):
    for i in nl.affine_range(2):
        o = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)  # ERROR
    return a


nki.jit(kernel)(np.ones((128, 512), np.float32))
