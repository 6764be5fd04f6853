"""Planted error: kernel[nl.nc(2)] on trn1.

Rule: nki-api.md §2.4.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: kernel\[nl.nc\(2\)\]: trn1 has at most 1 physical NeuronCore\(s\) per logical core \(LNC 1; nl.nc\(n\) spreads a grid dimension over n of them, nki-api.md §2.4\)
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):
    return a


nki.jit(kernel, platform_target='trn1')[nl.nc(2)](np.ones((128, 512), np.float32))  # ERROR
