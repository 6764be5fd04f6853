"""Planted error: kernel[2] on trn1.

Rule: nki-api.md §2.4 (trn1: one core).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: supports logical NeuronCore configs 1
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    pass


nki.simulate(nki.jit(kernel)[2], chip='trn1')(np.ones((128, 512), np.float32))  # ERROR
