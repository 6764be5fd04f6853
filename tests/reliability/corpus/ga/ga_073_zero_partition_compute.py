"""Planted error: a compute op on zero partitions.

Rule: nki-api.md §3.4 TC1, §3.5.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: memset: operand 'dst' covers 0 partitions \(shape \[0, 8\]\)
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t[64:64], value=0.0)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
