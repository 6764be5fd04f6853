"""Planted error: nisa.dma_copy out of PSUM.

Rule: nki-api.md §7 dma_copy (PSUM source rejected).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: dma_copy: operand 'src' is in psum; allowed: hbm, sbuf
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):
    p = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
    o = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=o, src=p)  # ERROR
    return o


nki.jit(kernel)(np.ones((128, 512), np.float32))
