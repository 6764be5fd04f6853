"""Planted error: writing two inputs that overlap in host memory.

Rule: host arrays: one copy each.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: KernelError: shares host memory with kernel argument 'p'
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(p, q):
    t = nl.ndarray((128, 4), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=1.0)
    nisa.dma_copy(dst=p, src=t)
    nisa.dma_copy(dst=q, src=t)  # ERROR


x = np.zeros((128, 8), np.float32)
nki.simulate(kernel)(x[:, 0:4], x[:, 2:6])
