"""Planted error: a tile slice past its partitions.

Rule: view bounds.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: OutOfBoundsError: dimension 0: index range \[0, 199\] exceeds dimension size 128
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    u = t[0:200, :]  # ERROR
    nisa.memset(dst=u, value=0.0)


nki.simulate(kernel)(np.ones((128, 512), np.float32))
