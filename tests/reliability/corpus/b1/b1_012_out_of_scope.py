"""Planted error: a loop-local tile used after the loop.

Rule: §11 err_local_variable_used_out_of_scope.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: KernelError: Local variable 't' is referenced outside of its parent scope.*err_local_variable_used_out_of_scope
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):
    o = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(1):
        t = nl.load(a)
    nl.store(o, value=t)  # ERROR
    return o


nki.jit(kernel)(np.ones((128, 512), np.float32))
