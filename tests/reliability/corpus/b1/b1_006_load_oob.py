"""Planted error: a load past the tensor.

Rule: §11 err_tensor_access_out_of_bound.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: OutOfBoundsError: err_tensor_access_out_of_bound
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):
    t = nl.load(a[0:128, 500:520])  # ERROR
    return t


nki.jit(kernel)(np.ones((128, 512), np.float32))
