"""Planted error: max8 over fewer than 8 elements.

Rule: nki-api.md §7 max8.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: max8: operand 'src' has 4 elements per partition; between 8 and 16384 allowed
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    x = nl.ndarray((128, 4), nl.float32, buffer=nl.sbuf)
    r = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=x, value=1.0)
    nisa.max8(dst=r, src=x)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
