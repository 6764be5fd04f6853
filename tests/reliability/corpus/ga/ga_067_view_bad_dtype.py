"""Planted error: a view as a dtype that does not divide the bytes.

Rule: nki-api.md §4.1 view.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: as float32: 3 bytes per partition is not a multiple of 4
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((128, 3), nl.int8, buffer=nl.sbuf)
    u = t.view(nl.float32)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
