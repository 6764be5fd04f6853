"""Planted error: a PSUM address not on a bank boundary.

Rule: nki-api.md §3.3 (PSUM on a bank boundary).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: nl.ndarray: PSUM address free offset 100 bytes is not on a PSUM bank boundary; PSUM tensors start at a multiple of 2048 bytes
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((128, 64), nl.float32, buffer=nl.psum, address=(0, 100))  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
