"""Planted error: tensor_tensor with both inputs in PSUM.

Rule: nki-api.md §3.2 (one PSUM input).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: operands data1, data2 are all in psum; at most 1 input may be in psum
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
    nisa.tensor_tensor(dst=z, data1=x, data2=y, op=nl.add)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
