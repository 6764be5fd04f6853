"""Planted error: an activation bias of two columns.

Rule: nki-api.md §7 activation (bias (P, 1)).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: activation: operand 'bias' must be a scalar or a \(P, 1\) tensor, got shape \(128, 2\)
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    b = nl.ndarray((128, 2), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=1.0)
    nisa.memset(dst=b, value=1.0)
    nisa.activation(dst=t, op=nl.exp, data=t, bias=b)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
