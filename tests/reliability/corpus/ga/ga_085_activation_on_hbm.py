"""Planted error: activation reading HBM.

Rule: nki-api.md §3.2 (ScalarE reads SBUF/PSUM).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: activation: operand 'data' is in hbm; allowed: sbuf, psum
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=t, op=nl.exp, data=a)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
