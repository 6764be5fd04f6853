"""Planted error: HWDGE on NC-v2.

Rule: nki-api.md §7 dma_copy (hwdge: v3+).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: dma_copy: dge_mode=hwdge on trn1 \(NeuronCore-v2\); hardware DGE exists on NeuronCore-v3
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((128, 4), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a[:, 0:4], dge_mode=nisa.dge_mode.hwdge)  # ERROR


nki.simulate(kernel, chip='trn1')(np.ones((128, 512), np.float32))
