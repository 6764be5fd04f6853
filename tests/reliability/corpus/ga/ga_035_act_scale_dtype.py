"""Planted error: an activation scale tensor in bf16.

Rule: nki-api.md §7 activation (fp32 scale).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: a scale tensor must be float32
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    s = nl.ndarray((128, 1), nl.bfloat16, buffer=nl.sbuf)
    nisa.memset(dst=t, value=1.0)
    nisa.memset(dst=s, value=1.0)
    nisa.activation(dst=t, op=nl.exp, data=t, scale=s)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
