"""Planted error: a Beta-1 float64 input.

Rule: nki-api.md §5A.1.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: float64 is not a device dtype
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):
    return a


nki.jit(kernel)(np.ones((4, 4)))
