"""Planted error: kernel[3] on trn2.

Rule: nki-api.md §2.4 (LNC 1 or 2).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: supports logical NeuronCore configs 1, 2
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    pass


nki.simulate(nki.jit(kernel)[3], chip='trn2')(np.ones((128, 512), np.float32))  # ERROR
