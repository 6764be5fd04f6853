"""Planted error: more PSUM tiles alive than PSUM holds.

Rule: nki-api.md §3.1.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: AllocationError: psum: cannot allocate 2048 bytes per partition x 128 partitions: requested 2048, free 0
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):
    ps = [nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum) for _ in range(8)]
    extra = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)  # ERROR
    return a


nki.jit(kernel)(np.ones((128, 512), np.float32))
