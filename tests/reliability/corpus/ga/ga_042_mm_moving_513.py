"""Planted error: a moving tile 1024 wide on NC-v3.

Rule: nki-api.md §3.4 TC3 (gemm_moving_fmax 512).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: nc_matmul: operand 'moving' has free size 1024; at most 512 \(gemm_moving_fmax\)
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    s = nl.ndarray((128, 128), nl.bfloat16, buffer=nl.sbuf)
    v = nl.ndarray((128, 1024), nl.bfloat16, buffer=nl.sbuf)
    nisa.memset(dst=s, value=1.0)
    nisa.memset(dst=v, value=1.0)
    p = nl.ndarray((128, 1024), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=p, stationary=s, moving=v)  # ERROR


nki.simulate(kernel, chip='trn2')(np.ones((128, 512), np.float32))
