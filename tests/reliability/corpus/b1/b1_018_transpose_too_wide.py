"""Planted error: nl.transpose of a 512-wide tile.

Rule: §11 err_size_of_dimension_exceed_arch_limit.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: exceed architecture limitation
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):
    t = nl.load(a)
    u = nl.transpose(t)  # ERROR
    return a


nki.jit(kernel)(np.ones((128, 512), np.float32))
