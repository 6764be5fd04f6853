"""Planted error: a matmul reading PSUM.

Rule: nki-api.md §3.2 (TensorE reads SBUF).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: nc_matmul: operand 'stationary' is in psum; allowed: sbuf
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    p = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
    q = nl.ndarray((128, 128), nl.float32, buffer=nl.psum)
    m = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=q, value=1.0)
    nisa.memset(dst=m, value=1.0)
    nisa.nc_matmul(dst=p, stationary=q, moving=m)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
