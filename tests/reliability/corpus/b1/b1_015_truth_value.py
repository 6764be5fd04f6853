"""Planted error: if on a tile.

Rule: §11 err_dynamic_control_flow_not_supported.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: dynamic control-flow depending on tensor value is not supported
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):
    t = nl.load(a)
    if t:  # ERROR
        pass
    return a


nki.jit(kernel)(np.ones((128, 512), np.float32))
