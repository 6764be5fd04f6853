"""Planted error: a DMA of zero partitions.

Rule: nki-api.md §3.4 TC1, §3.5.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: dma_copy: operand 'dst' covers 0 partitions \(shape \[0, 4\]\); an on-chip access covers 1 to 128 partitions
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((128, 4), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t[5:5], src=a[5:5, 0:4])  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
