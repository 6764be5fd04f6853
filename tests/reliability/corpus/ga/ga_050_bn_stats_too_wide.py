"""Planted error: bn_stats over more than 512 elements.

Rule: nki-api.md §3.6 bn_stats_fmax.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: bn_stats: operand 'data' has free size 1024; at most 512 \(bn_stats_fmax\)
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((128, 1024), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=1.0)
    s = nl.ndarray((128, 6), nl.float32, buffer=nl.sbuf)
    nisa.bn_stats(dst=s, data=t)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
