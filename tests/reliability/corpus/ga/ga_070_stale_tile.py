"""Planted error: an SBUF tile kept from an earlier launch.

Rule: nki-api.md §2.4 (sbuf per kernel instance).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: KernelError: belongs to an earlier kernel launch
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


kept = {}


def first(a):
    t = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=1.0)
    kept['t'] = t


def kernel(a):
    out = nl.ndarray((128, 8), nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=kept['t'])  # ERROR
    return out


nki.simulate(first)(np.ones((128, 512), np.float32))
nki.simulate(kernel)(np.ones((128, 512), np.float32))
