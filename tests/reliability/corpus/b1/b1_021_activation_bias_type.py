"""Planted error: an activation bias of the wrong shape.

Rule: nki-api.md §7 activation (bias (P, 1)).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: operand 'bias' must be a scalar or a \(P, 1\) tensor, got shape \(128, 2\)
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):
    t = nl.load(a)
    b = nl.load(a[:, 0:2])
    u = nisa.activation(op=nl.exp, data=t, bias=b)  # ERROR
    return a


nki.jit(kernel)(np.ones((128, 512), np.float32))
