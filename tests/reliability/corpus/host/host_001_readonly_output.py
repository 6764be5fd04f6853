"""Planted error: writing a read-only input array.

Rule: host arrays: a read-only array cannot take values back.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: KernelError: dma_copy operand 'dst': kernel argument 'o' is a read-only array \(numpy flags.writeable is False\), so what the kernel writes here could not be given back
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a, o):
    t = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.dma_copy(dst=o, src=t)  # ERROR


o = np.zeros((128, 512), np.float32)
o.flags.writeable = False
nki.simulate(kernel)(np.ones((128, 512), np.float32), o)
