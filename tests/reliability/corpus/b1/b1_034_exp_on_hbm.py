"""Planted error: nl.exp of an HBM tensor.

Rule: §11 err_unsupported_memory.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: Expected operand 'x' of 'nl.exp' to be in address space 'psum\|sbuf'.*err_unsupported_memory
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):
    t = nl.exp(a)  # ERROR
    return a


nki.jit(kernel)(np.ones((128, 512), np.float32))
