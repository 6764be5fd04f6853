"""Planted error: t[...] = value on a current-API tensor.

Rule: nki-api.md §4.1 (GA tensors are not assignable).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: KernelError: item assignment to sbuf tensor \[128, 8\] float32.*current-API tensors are written by instructions
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    t[...] = 1.0  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
