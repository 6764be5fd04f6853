"""Planted error: a bitwise op on float tiles.

Rule: nki-api.md §5A.2 (bitvec ops need integers).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: bitvec op bitwise_and needs integer dtypes
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    x = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=x, value=1.0)
    nisa.tensor_tensor(dst=x, data1=x, data2=x, op=nl.bitwise_and)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
