"""Planted error: nisa.tensor_tensor of two PSUM tiles.

Rule: nki-api.md §3.2.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: tensor_tensor: operands data1, data2 are all in psum; at most 1 input may be in psum
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):
    p = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
    q = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
    r = nisa.tensor_tensor(p, q, op=nl.add)  # ERROR
    return a


nki.jit(kernel)(np.ones((128, 512), np.float32))
