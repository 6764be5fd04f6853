"""Planted error: dma_transpose of a 1-byte dtype.

Rule: nki-api.md §7 dma_transpose (2- and 4-byte dtypes).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: dma_transpose: dtype int8 \(1 bytes\); 2- or 4-byte dtypes
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    s = nl.ndarray((16, 16), nl.int8, buffer=nl.sbuf)
    nisa.memset(dst=s, value=0)
    t = nl.ndarray((16, 16), nl.int8, buffer=nl.sbuf)
    nisa.dma_transpose(dst=t, src=s)  # ERROR


nki.simulate(kernel, chip='trn2')(np.ones((128, 512), np.float32))
