"""Planted error: HBM scratch beyond the host's allowance.

Rule: host memory (TRNSIM_HOST_MEMORY_LIMIT).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: HostMemoryError: host memory: hbm tensor \[32768, 512\] float32 allocated at host_\d+_host_memory_limit.py:\d+ needs 1048576 more bytes of host RAM, but only 0 are available \(TRNSIM_HOST_MEMORY_LIMIT=4194304
import os

import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    big = nl.ndarray((32768, 512), nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    for i in nl.affine_range(256):
        nisa.dma_copy(dst=big[i * 128:(i + 1) * 128, :], src=t)  # ERROR


os.environ['TRNSIM_HOST_MEMORY_LIMIT'] = '4M'
nki.simulate(kernel)(np.ones((128, 512), np.float32))
