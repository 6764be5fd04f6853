"""Planted error: a DMA whose element counts differ.

Rule: nki-api.md §7 dma_copy (counts must match).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: dma_copy: dst has 512 elements \[128, 4\] but src has 1024 \[128, 8\]; element counts must match
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((128, 4), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a[:, 0:8])  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
