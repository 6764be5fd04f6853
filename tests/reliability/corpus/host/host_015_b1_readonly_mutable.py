"""Planted error: a Beta-1 mutable parameter that is a read-only array.

Rule: host arrays.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: KernelError: dma_copy operand 'dst': kernel argument 'o' is a read-only array
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a, o: nt.mutable_tensor):
    nl.store(o, value=nl.load(a))  # ERROR
    return o


o = np.zeros((128, 512), np.float32)
o.flags.writeable = False
nki.jit(kernel)(np.ones((128, 512), np.float32), o)
