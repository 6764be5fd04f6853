"""Planted error: activation_reduce with max.

Rule: nki-api.md §7 activation_reduce (sum only).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: activation_reduce: reduce_op='maximum'; the Scalar Engine registers only sum
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    r = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=1.0)
    nisa.activation_reduce(dst=t, op=nl.exp, data=t, reduce_op=nl.maximum, reduce_res=r)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
