"""Planted error: a kernel returning an SBUF tile.

Rule: nki-api.md §2.3 (outputs live in HBM).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: an on-chip \(sbuf\) tensor; kernel outputs must be HBM tensors allocated with buffer=nl.shared_hbm
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=1.0)
    return t  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
