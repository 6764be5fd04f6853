"""Planted error: an assignment into a smaller destination.

Rule: §11 err_store_dst_shape_smaller_than_other_shape.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: Illegal assignment destination shape.*err_store_dst_shape_smaller_than_other_shape
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):
    t = nl.load(a)
    u = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    u[...] = t  # ERROR
    return a


nki.jit(kernel)(np.ones((128, 512), np.float32))
