"""Planted error: writing a parameter not marked mutable.

Rule: §11 err_cannot_update_immutable_parameter.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: KernelError: err_cannot_update_immutable_parameter
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):
    nl.store(a, value=nl.load(a))  # ERROR
    return a


nki.jit(kernel)(np.ones((128, 512), np.float32))
