"""Planted error: nisa.exponential on NC-v3.

Rule: nki-api.md §7 exponential (v4).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: exponential needs NeuronCore-v4 or newer; trn2 is NeuronCore-v3
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=1.0)
    nisa.exponential(dst=t, src=t)  # ERROR


nki.simulate(kernel, chip='trn2')(np.ones((128, 512), np.float32))
