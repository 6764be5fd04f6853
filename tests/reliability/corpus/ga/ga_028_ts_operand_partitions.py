"""Planted error: a tensor_scalar operand with other partitions.

Rule: nki-api.md §4.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: tensor_scalar: operand 'operand0' has 64 partitions but the data has 128
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    x = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    s = nl.ndarray((64, 1), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=x, value=1.0)
    nisa.memset(dst=s, value=1.0)
    nisa.tensor_scalar(dst=x, data=x, op0=nl.add, operand0=s)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
