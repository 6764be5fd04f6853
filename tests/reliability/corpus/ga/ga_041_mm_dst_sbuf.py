"""Planted error: a matmul writing SBUF.

Rule: nki-api.md §3.2 (TensorE writes PSUM).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: nc_matmul: operand 'dst' is in sbuf; allowed: psum
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    s = nl.ndarray((128, 128), nl.bfloat16, buffer=nl.sbuf)
    v = nl.ndarray((128, 512), nl.bfloat16, buffer=nl.sbuf)
    nisa.memset(dst=s, value=1.0)
    nisa.memset(dst=v, value=1.0)
    p = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
    nisa.nc_matmul(dst=p, stationary=s, moving=v)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
