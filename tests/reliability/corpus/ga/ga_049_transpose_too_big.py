"""Planted error: a transpose result of 256 partitions.

Rule: nki-api.md §3.4 TC1.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: psum tensor \[256, 128\]: partition dimension 256 exceeds the 128 partitions
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    s = nl.ndarray((128, 256), nl.bfloat16, buffer=nl.sbuf)
    nisa.memset(dst=s, value=1.0)
    p = nl.ndarray((256, 128), nl.bfloat16, buffer=nl.psum)  # ERROR
    nisa.nc_transpose(dst=p, data=s)


nki.simulate(kernel)(np.ones((128, 512), np.float32))
