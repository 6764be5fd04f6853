"""Planted error: op=abs_max on NC-v3.

Rule: nki-api.md §7 tensor_tensor (abs_max: v4).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: needs NeuronCore-v4 or newer; trn2 is NeuronCore-v3
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=1.0)
    nisa.tensor_tensor(dst=t, data1=t, data2=t, op=nl.abs_max)  # ERROR


nki.simulate(kernel, chip='trn2')(np.ones((128, 512), np.float32))
