"""Planted error: a matmul mixing the two fp8 e4m3 kinds.

Rule: nki-api.md §5A.1 (e4m3fn cannot mix with e4m3).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: nc_matmul: stationary and moving mix float8_e4m3 \(legacy\) and float8_e4m3fn \(OCP\)
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    s = nl.ndarray((128, 128), nl.float8_e4m3, buffer=nl.sbuf)
    v = nl.ndarray((128, 512), nl.float8_e4m3fn, buffer=nl.sbuf)
    nisa.memset(dst=s, value=1.0)
    nisa.memset(dst=v, value=1.0)
    p = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=p, stationary=s, moving=v)  # ERROR


nki.simulate(kernel, chip='trn3')(np.ones((128, 512), np.float32))
