"""Planted error: a numpy array as an ISA operand.

Rule: nki-api.md §7 (operands are tiles).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: tensor_tensor: operand 'data2' must be a tensor, got a numpy array \(shape \(128, 8\), dtype float64\)
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=t, data1=t, data2=np.ones((128, 8)), op=nl.add)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
