"""Planted error: a numpy masked array input.

Rule: host arrays: a device tensor has no mask.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: kernel argument 'a' is a numpy masked array: a device tensor has no mask
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    pass


nki.simulate(kernel)(np.ma.masked_array(np.ones((4, 4), np.float32), mask=np.eye(4)))
