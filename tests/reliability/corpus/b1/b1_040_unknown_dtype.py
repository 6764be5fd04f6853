"""Planted error: an unknown dtype name.

Rule: nki-api.md §5A.1.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: Unsupported dtype 'float128', expected one of.*err_unsupported_dtype_value
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):
    t = nl.load(a, dtype='float128')  # ERROR
    return t


nki.jit(kernel)(np.ones((128, 512), np.float32))
