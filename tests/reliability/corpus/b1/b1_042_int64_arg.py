"""Planted error: an int64 argument.

Rule: nki-api.md §5A.1.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: kernel argument 'a': dtype int64 has no device equivalent \(known: float32
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):
    return a


nki.jit(kernel)(np.ones((4, 4), np.int64))
