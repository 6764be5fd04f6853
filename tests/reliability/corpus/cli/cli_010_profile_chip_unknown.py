"""Planted error: --chip trn9.

Rule: trnsim CLI: checks before it simulates.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: UsageError: --chip 'trn9' is not a chip \(allowed: trn1
# cli: profile {file} -o {tmp}/k.pftrace --chip trn9

import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.dma_copy(dst=out, src=t)
    return out


nki.simulate(kernel)(np.ones((128, 64), np.float32))
