"""Planted error: memset into HBM.

Rule: nki-api.md §3.2 (compute writes SBUF/PSUM).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: memset: operand 'dst' is in hbm
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    nisa.memset(dst=a, value=0.0)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
