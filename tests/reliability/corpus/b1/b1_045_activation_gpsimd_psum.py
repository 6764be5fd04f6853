"""Planted error: GpSimd reading PSUM.

Rule: nki-api.md §3.2 (GpSimd never touches PSUM).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: tensor_copy: the gpsimd engine cannot read psum
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):
    p = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
    r = nisa.tensor_copy(p, engine=nisa.gpsimd_engine)  # ERROR
    return a


nki.jit(kernel)(np.ones((128, 512), np.float32))
