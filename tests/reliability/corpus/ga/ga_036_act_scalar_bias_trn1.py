"""Planted error: a scalar activation bias on NC-v2.

Rule: nki-api.md §7 activation (scalar bias v3+).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: activation: bias=1.0 is a scalar on trn1; NeuronCore-v2 takes a \(P, 1\) bias tensor
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=1.0)
    nisa.activation(dst=t, op=nl.exp, data=t, bias=1.0)  # ERROR


nki.simulate(kernel, chip='trn1')(np.ones((128, 512), np.float32))
