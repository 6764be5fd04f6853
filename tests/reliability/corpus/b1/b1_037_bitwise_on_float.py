"""Planted error: a bitwise op on float tiles.

Rule: nki-api.md §5A.2.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: bitvec op bitwise_and needs integer dtypes, but '\w+' is float32
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):
    t = nl.load(a)
    u = nl.bitwise_and(t, t)  # ERROR
    return a


nki.jit(kernel)(np.ones((128, 512), np.float32))
