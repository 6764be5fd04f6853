"""Planted error: tensor_tensor without data2.

Rule: nki-api.md §7 tensor_tensor signature.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: CallSignatureError: nisa.tensor_tensor: missing 1 required positional argument: 'data2'; signature:
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=t, data1=t, op=nl.add)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
