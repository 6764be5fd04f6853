"""Planted error: a 64-partition access starting at partition 32.

Rule: nki-api.md §3.5.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: must start at partition 0 or 64
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    x = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=x[32:96], value=1.0)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
