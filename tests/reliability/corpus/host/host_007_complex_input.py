"""Planted error: a complex input.

Rule: nki-api.md §5A.1 dtypes.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: dtype complex64 has no device equivalent
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    pass


nki.simulate(kernel)(np.ones((4, 4), np.complex64))
