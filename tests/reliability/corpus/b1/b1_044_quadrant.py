"""Planted error: a 40-partition access starting at partition 16.

Rule: nki-api.md §3.5.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: operand 'data' spans 40 partitions starting at partition 16; an access of 40 partitions must start at partition 0 or 64 \(quadrant rule\)
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):
    t = nl.load(a)
    u = nl.exp(t[16:56])  # ERROR
    return a


nki.jit(kernel)(np.ones((128, 512), np.float32))
