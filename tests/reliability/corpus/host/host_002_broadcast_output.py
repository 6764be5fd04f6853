"""Planted error: writing a broadcast input.

Rule: host arrays: elements sharing memory.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: KernelError: dma_copy operand 'dst': kernel argument 'o' is a read-only array
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a, o):
    t = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.dma_copy(dst=o, src=t)  # ERROR


o = np.broadcast_to(np.float32(0), (128, 512))
nki.simulate(kernel)(np.ones((128, 512), np.float32), o)
