"""Planted error: a kernel launching a kernel.

Rule: nki-api.md §2.4 (no nested launches).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: KernelError: a kernel launch cannot be nested inside a running kernel \(call the inner function directly\)
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def inner(a):
    pass


def kernel(a):
    nki.simulate(inner)(np.ones((4, 4), np.float32))  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
