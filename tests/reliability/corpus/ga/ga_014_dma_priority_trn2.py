"""Planted error: a DMA priority on NC-v3.

Rule: nki-api.md §7 dma_copy (priority: v4).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: dma_copy: priority=1 on trn2 \(NeuronCore-v3\); DMA priority exists on NeuronCore-v4
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((128, 4), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a[:, 0:4], priority=1)  # ERROR


nki.simulate(kernel, chip='trn2')(np.ones((128, 512), np.float32))
