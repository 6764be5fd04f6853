"""Planted error: a load of zero partitions.

Rule: nki-api.md §3.4 TC1.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: partition dimension 0; an on-chip tensor has 1 to 128 partitions
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):
    t = nl.load(a[5:5])  # ERROR
    return t


nki.jit(kernel)(np.ones((128, 512), np.float32))
