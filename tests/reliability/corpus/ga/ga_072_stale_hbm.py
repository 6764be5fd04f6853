"""Planted error: an HBM scratch tensor kept from an earlier launch.

Rule: nki-api.md §2.4.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: KernelError: belongs to an earlier kernel launch
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


kept = {}


def first(a):
    t = nl.ndarray((128, 8), nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=t, src=a[:, 0:8])
    kept['t'] = t


def kernel(a):
    s = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=kept['t'])  # ERROR


nki.simulate(first)(np.ones((128, 512), np.float32))
nki.simulate(kernel)(np.ones((128, 512), np.float32))
