"""Planted error: a tile kept from an earlier launch.

Rule: nki-api.md §2.4 (sbuf per instance).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: KernelError: belongs to an earlier kernel launch
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


kept = {}


def first(a):
    kept['t'] = nl.load(a)
    return a


def kernel(a):
    o = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(o, value=kept['t'])  # ERROR
    return o


nki.jit(first)(np.ones((128, 512), np.float32))
nki.jit(kernel)(np.ones((128, 512), np.float32))
