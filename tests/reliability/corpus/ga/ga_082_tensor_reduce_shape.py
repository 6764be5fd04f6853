"""Planted error: tensor_reduce into a destination of the wrong shape.

Rule: nki-api.md §7 tensor_reduce.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: dst has shape \(128, 2\) but reducing axes \(1,\) of data \(128, 8\)
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    r = nl.ndarray((128, 2), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=1.0)
    nisa.tensor_reduce(dst=r, op=nl.add, data=t, axis=1)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
