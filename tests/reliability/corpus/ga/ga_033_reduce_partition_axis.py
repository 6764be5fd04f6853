"""Planted error: tensor_reduce over the partition axis.

Rule: nki-api.md §7 tensor_reduce (free axes).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: tensor_reduce: axis=0 for a 2-D input \(partition axis 0 cannot be reduced\)
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    r = nl.ndarray((1, 8), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=1.0)
    nisa.tensor_reduce(dst=r, op=nl.add, data=t, axis=0)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
