"""Planted error: an integer index past the tile.

Rule: view bounds.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: OutOfBoundsError: dimension 1: index 9 is out of range for size 8
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    u = t[:, 9]  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
