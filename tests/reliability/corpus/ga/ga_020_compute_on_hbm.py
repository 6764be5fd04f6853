"""Planted error: a Vector Engine operand in HBM.

Rule: nki-api.md §3.2 (engines read SBUF/PSUM).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: tensor_tensor: operand 'data1' is in hbm; allowed: sbuf, psum
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=t, data1=a, data2=t, op=nl.add)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
