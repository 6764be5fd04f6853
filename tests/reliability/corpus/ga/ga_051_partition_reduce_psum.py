"""Planted error: tensor_partition_reduce on PSUM.

Rule: nki-api.md §3.2 (GpSimd never touches PSUM).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: tensor_partition_reduce: operand 'data' is in psum; allowed: sbuf
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    p = nl.ndarray((128, 8), nl.float32, buffer=nl.psum)
    nisa.memset(dst=p, value=1.0)
    r = nl.ndarray((1, 8), nl.float32, buffer=nl.sbuf)
    nisa.tensor_partition_reduce(dst=r, op=nl.add, data=p)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
