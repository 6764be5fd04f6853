"""Planted error: an unknown buffer.

Rule: nki-api.md §3.2 buffers.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: buffer='dram' is not a buffer
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((128, 4), nl.float32, buffer='dram')  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
