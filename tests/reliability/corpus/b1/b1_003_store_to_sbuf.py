"""Planted error: nl.store into an SBUF tile.

Rule: §11 err_unsupported_memory.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: Expected operand 'dst' of 'nl.store' to be in address space 'hbm'.*err_unsupported_memory
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):
    t = nl.load(a)
    u = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nl.store(u, value=t)  # ERROR
    return a


nki.jit(kernel)(np.ones((128, 512), np.float32))
