"""Planted error: a while loop on a tensor value.

Rule: §11 err_while_loop_requires_unconditional_entry.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: while loops on tensor values are not supported.*err_while_loop_requires_unconditional_entry
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):
    t = nl.load(a)
    while t:  # ERROR
        pass
    return a


nki.jit(kernel)(np.ones((128, 512), np.float32))
