"""Planted error: tensor_tensor operands of different shapes.

Rule: nki-api.md §4 (equal partitions and elements).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: operands must have the same elements per partition: got dst=8, data1=8, data2=4
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    x = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    y = nl.ndarray((128, 4), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=x, value=1.0)
    nisa.memset(dst=y, value=1.0)
    nisa.tensor_tensor(dst=x, data1=x, data2=y, op=nl.add)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
