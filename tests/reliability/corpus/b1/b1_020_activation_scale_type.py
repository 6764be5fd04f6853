"""Planted error: an activation scale of the wrong type.

Rule: §11 err_activation_scale_invalid_type.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: 'scale' param of 'activation' must be a scalar or vector of type float32.*err_activation_scale_invalid_type
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):
    t = nl.load(a)
    u = nisa.activation(op=nl.exp, data=t, scale='two')  # ERROR
    return a


nki.jit(kernel)(np.ones((128, 512), np.float32))
