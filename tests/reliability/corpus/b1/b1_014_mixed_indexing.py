"""Planted error: slices mixed with arange indices.

Rule: §11 err_unsupported_mixing_basic_advanced_tensor_indexing.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: mixing basic tensor indexing .* and advanced tensor indexing .* is not supported
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):
    i = nl.arange(128)[:, None]
    t = nl.load(a[i, 0:4])  # ERROR
    return t


nki.jit(kernel)(np.ones((128, 512), np.float32))
