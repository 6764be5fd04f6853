"""Planted error: an SBUF tile larger than a partition.

Rule: nki-api.md §3.1.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: AllocationError: sbuf: cannot allocate 400000 bytes per partition x 128 partitions
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):
    t = nl.ndarray((128, 100000), dtype=nl.float32, buffer=nl.sbuf)  # ERROR
    return a


nki.jit(kernel)(np.ones((128, 512), np.float32))
