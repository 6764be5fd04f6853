"""Planted error: a compute op stepping over partitions.

Rule: nki-api.md §3.4 (partition stride must be dense).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: memset: operand 'dst' steps over partitions with stride 2; compute engines access a contiguous range of partitions
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    x = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=x[0:128:2], value=1.0)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
