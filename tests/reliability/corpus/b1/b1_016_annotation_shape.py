"""Planted error: an argument of another shape than its annotation.

Rule: §11 err_annotation_shape_mismatch.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: shape of `a\[128, 512\]` does not match the expected shape.*err_annotation_shape_mismatch
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a: nt.tensor[128, 256, nl.float32]):  # ERROR
    return a


nki.jit(kernel)(np.ones((128, 512), np.float32))
