"""Planted error: an HBM view past the tensor.

Rule: view bounds (nki-api.md §4).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: OutOfBoundsError: dimension 1: index range \[510, 513\] exceeds dimension size 512
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((128, 4), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a[:, 510:514])  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
