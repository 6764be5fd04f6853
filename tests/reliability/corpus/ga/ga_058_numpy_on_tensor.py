"""Planted error: np.exp of a device tensor.

Rule: nki-api.md §4.1 (no numpy on device tensors).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: KernelError: numpy function np.exp applied to sbuf tensor.*numpy cannot run on device tensors
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    u = np.exp(t)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
