"""Planted error: a unary op given an operand.

Rule: nki-api.md §7 tensor_scalar (unary ops take no operand).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: abs is a unary op but operand0=2.0; pass operand0=None
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    x = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=x, value=1.0)
    nisa.tensor_scalar(dst=x, data=x, op0=nl.abs, operand0=2.0)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
