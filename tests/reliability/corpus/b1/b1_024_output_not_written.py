"""Planted error: an output written only by a zero-trip loop.

Rule: §11 err_tensor_output_not_written_to.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: KernelError: `o` is returned but never written to.*err_tensor_output_not_written_to
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):  # ERROR
    o = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(0):
        nl.store(o, value=nl.load(a))
    return o


nki.jit(kernel)(np.ones((128, 512), np.float32))
