"""Planted error: a float64 tile.

Rule: nki-api.md §5A.1 dtypes (no float64).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: unknown dtype <class 'numpy.float64'> \(known: float32
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((128, 4), np.float64, buffer=nl.sbuf)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
