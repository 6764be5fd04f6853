"""Planted error: GpSimd reading PSUM.

Rule: nki-api.md §3.2 (GpSimd never touches PSUM).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: the gpsimd engine cannot read psum
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    p = nl.ndarray((128, 8), nl.float32, buffer=nl.psum)
    t = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=p, value=0.0)
    nisa.tensor_copy(dst=t, src=p, engine=nisa.gpsimd_engine)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
