"""Planted error: quantize_mx on NC-v3.

Rule: nki-api.md §7 quantize_mx (v4).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: quantize_mx: not available on trn2 \(NeuronCore-v3\)
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    s = nl.ndarray((128, 64), nl.bfloat16, buffer=nl.sbuf)
    d = nl.ndarray((128, 16), nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    sc = nl.ndarray((128, 2), nl.uint8, buffer=nl.sbuf)
    nisa.memset(dst=s, value=1.0)
    nisa.quantize_mx(dst=d, src=s, dst_scale=sc)  # ERROR


nki.simulate(kernel, chip='trn2')(np.ones((128, 512), np.float32))
