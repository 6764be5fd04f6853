"""Planted error: nc_matmul with a 1024-wide result tile.

Rule: nki-api.md §3.4 TC2.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: a PSUM tile fits one 2048-byte bank per partition on trn2
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):
    s = nl.load(a[0:128, 0:128])
    m = nl.load(a.reshape((64, 1024))[0:64, :])
    p = nisa.nc_matmul(s[0:64, :], m)  # ERROR
    return a


nki.jit(kernel, platform_target='trn2')(np.ones((128, 512), np.float32))
