"""Planted error: an activation of an ALU op.

Rule: nki-api.md §7 activation functions.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: op='add' is not a Scalar Engine activation function \(known: copy
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=1.0)
    nisa.activation(dst=t, op=nl.add, data=t)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
