"""Planted error: scalar_tensor_tensor with both tensors in PSUM.

Rule: nki-api.md §3.2.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: scalar_tensor_tensor: operands 'data' and 'operand1' are both in psum; at most one of them may be in psum
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    x = nl.ndarray((128, 8), nl.float32, buffer=nl.psum)
    y = nl.ndarray((128, 8), nl.float32, buffer=nl.psum)
    z = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=x, value=1.0)
    nisa.memset(dst=y, value=1.0)
    nisa.scalar_tensor_tensor(dst=z, data=x, op0=nl.add, operand0=1.0, op1=nl.add, operand1=y)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
