"""Planted error: tensor_copy into HBM.

Rule: nki-api.md §3.2 (compute writes SBUF/PSUM).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: tensor_copy: operand 'dst' is in hbm
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=0.0)
    nisa.tensor_copy(dst=a, src=t)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
