"""Planted error: a PSUM tile two banks wide.

Rule: nki-api.md §3.4 TC2 (one 2 KiB bank).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: a PSUM tile fits one 2048-byte bank
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):
    p = nl.zeros((128, 1024), dtype=nl.float32, buffer=nl.psum)  # ERROR
    return a


nki.jit(kernel, platform_target='trn2')(np.ones((128, 512), np.float32))
