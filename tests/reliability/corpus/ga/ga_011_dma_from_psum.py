"""Planted error: a DMA reading PSUM.

Rule: nki-api.md §7 dma_copy (PSUM source rejected).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: dma_copy: operand 'src' is in psum
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    p = nl.ndarray((128, 4), nl.float32, buffer=nl.psum)
    t = nl.ndarray((128, 4), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=p)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
