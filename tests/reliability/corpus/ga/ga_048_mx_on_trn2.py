"""Planted error: nc_matmul_mx on NC-v3.

Rule: nki-api.md §7 nc_matmul_mx (v4).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: nc_matmul_mx: not available on trn2 \(NeuronCore-v3\); needs NeuronCore-v4
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    s = nl.ndarray((128, 128), nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    v = nl.ndarray((128, 512), nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    ss = nl.ndarray((128, 4), nl.uint8, buffer=nl.sbuf)
    vs = nl.ndarray((128, 16), nl.uint8, buffer=nl.sbuf)
    p = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
    nisa.nc_matmul_mx(dst=p, stationary=s, moving=v, stationary_scale=ss, moving_scale=vs)  # ERROR


nki.simulate(kernel, chip='trn2')(np.ones((128, 512), np.float32))
