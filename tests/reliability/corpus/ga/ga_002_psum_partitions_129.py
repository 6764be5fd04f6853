"""Planted error: a PSUM tile of 129 partitions.

Rule: nki-api.md §3.4 TC1.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: partition dimension 129 exceeds the 128 partitions
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((129, 4), nl.float32, buffer=nl.psum)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
