"""Planted error: activate2 on NC-v3.

Rule: nki-api.md §7 activate2 (v4).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: activate2: not available on trn2 \(NeuronCore-v3\); needs NeuronCore-v4 \(trn3\)
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=1.0)
    nisa.activate2(dst=t, op=nl.exp, data=t, imm0=1.0, imm1=0.0, op0=nl.multiply, op1=nl.add)  # ERROR


nki.simulate(kernel, chip='trn2')(np.ones((128, 512), np.float32))
