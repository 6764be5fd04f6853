"""Planted error: an affine_range iteration reading the previous one's write.

Rule: nki-api.md §5.1 affine_range.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: affine_range iterations must be independent.*err_loop_carried_dependency
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):
    acc = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(4):
        acc[...] = nl.exp(acc)  # ERROR
    o = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(o, value=acc)
    return o


nki.jit(kernel)(np.ones((128, 512), np.float32))
