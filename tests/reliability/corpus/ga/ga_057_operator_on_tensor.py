"""Planted error: t + t on current-API tensors.

Rule: nki-api.md §4.1 (no operators in GA).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: KernelError: operator \+ on sbuf tensor.*current-API tensors have no Python operators
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    u = t + t  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
