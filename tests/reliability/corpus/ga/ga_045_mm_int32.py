"""Planted error: a matmul of int32 tiles.

Rule: nki-api.md §7 nc_matmul dtypes.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: nc_matmul: operand 'stationary' has dtype int32; allowed on trn3: float8_e4m3
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    s = nl.ndarray((128, 128), nl.int32, buffer=nl.sbuf)
    v = nl.ndarray((128, 512), nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=s, value=1)
    nisa.memset(dst=v, value=1)
    p = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=p, stationary=s, moving=v)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
