"""Planted error: nl.load of an SBUF tile.

Rule: §11 err_unsupported_memory.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: Expected operand 'src' of 'nl.load' to be in address space 'hbm', but got a tile in 'sbuf' instead. \[err_unsupported_memory\]
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):
    t = nl.load(a)
    u = nl.load(t)  # ERROR
    return u


nki.jit(kernel)(np.ones((128, 512), np.float32))
