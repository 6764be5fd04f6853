"""Planted error: an activation on GpSimd on NC-v3.

Rule: nki-api.md §7 activation (GpSimd: v4).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: GpSimd activations need NeuronCore-v4
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=1.0)
    nisa.activation(dst=t, op=nl.exp, data=t, engine=nisa.gpsimd_engine)  # ERROR


nki.simulate(kernel, chip='trn2')(np.ones((128, 512), np.float32))
