"""Planted error: two affine_range iterations writing one location.

Rule: §11 err_unexpected_output_dependencies.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: affine_range iterations must write disjoint locations.*err_unexpected_output_dep
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):
    o = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(4):
        nl.store(o, value=nl.load(a))  # ERROR
    return o


nki.jit(kernel)(np.ones((128, 512), np.float32))
