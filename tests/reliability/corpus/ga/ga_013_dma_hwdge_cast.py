"""Planted error: an HWDGE DMA that casts.

Rule: nki-api.md §5A.1 (HWDGE requires equal dtypes).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: dma_copy: dge_mode=hwdge with src float32 and dst bfloat16; hardware DGE does not cast
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((128, 4), nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a[:, 0:4], dge_mode=nisa.dge_mode.hwdge)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
