"""Planted error: a malformed TRNSIM_HOST_MEMORY_LIMIT.

Rule: host memory (TRNSIM_HOST_MEMORY_LIMIT).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: HostMemoryError: TRNSIM_HOST_MEMORY_LIMIT='lots' is not a number of bytes
import os

import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)


os.environ['TRNSIM_HOST_MEMORY_LIMIT'] = 'lots'
nki.simulate(kernel)(np.ones((128, 512), np.float32))
