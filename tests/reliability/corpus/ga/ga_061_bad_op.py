"""Planted error: an integer as an ALU op.

Rule: nki-api.md §7 tensor_tensor (op: an nl ALU op).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: tensor_tensor: op=42 is not an ALU operator
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=1.0)
    nisa.tensor_tensor(dst=t, data1=t, data2=t, op=42)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
