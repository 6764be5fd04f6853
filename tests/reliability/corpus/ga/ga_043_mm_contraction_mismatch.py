"""Planted error: matmul operands of different contraction sizes.

Rule: nki-api.md §7 nc_matmul.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: nc_matmul: operands must have the same partition count: got stationary=128, moving=64
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    s = nl.ndarray((128, 128), nl.bfloat16, buffer=nl.sbuf)
    v = nl.ndarray((64, 512), nl.bfloat16, buffer=nl.sbuf)
    nisa.memset(dst=s, value=1.0)
    nisa.memset(dst=v, value=1.0)
    p = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=p, stationary=s, moving=v)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
