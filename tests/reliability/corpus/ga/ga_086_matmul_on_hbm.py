"""Planted error: a matmul reading HBM.

Rule: nki-api.md §3.2 (TensorE reads SBUF).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: nc_matmul: operand 'moving' is in hbm; allowed: sbuf
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    p = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
    s = nl.ndarray((128, 128), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=s, value=1.0)
    nisa.nc_matmul(dst=p, stationary=s, moving=a)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
