"""Planted error: depends_on a tensor.

Rule: nki-api.md §2.6 depends_on.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: KernelError: expected instructions returned by nki.isa calls
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    first = nisa.memset(dst=t, value=1.0)
    first.depends_on(t)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
