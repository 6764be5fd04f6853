"""Planted error: a tensor_scalar operand of two columns.

Rule: nki-api.md §4 ((P, 1) operand).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: must be a scalar or a \(P, 1\) tensor
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    x = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    s = nl.ndarray((128, 2), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=x, value=1.0)
    nisa.memset(dst=s, value=1.0)
    nisa.tensor_scalar(dst=x, data=x, op0=nl.add, operand0=s)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
