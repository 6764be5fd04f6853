"""Planted error: kernel[nl.nc(3)] on trn2.

Rule: nki-api.md §2.4 (nl.nc: physical cores of a logical core).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: kernel\[nl.nc\(3\)\]: trn2 has at most 2
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):
    return a


nki.jit(kernel, platform_target='trn2')[nl.nc(3)](np.ones((128, 512), np.float32))  # ERROR
