"""Planted error: a block dimension before the partition dimension.

Rule: §11 err_failed_to_infer_tile_from_local_tensor.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: the first dimension of the tile is not the partition dimension.*err_failed_to_infer_tile_from_local_tensor
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):
    t = nl.ndarray((4, nl.par_dim(128), 8), dtype=nl.float32, buffer=nl.sbuf)
    u = nl.exp(t)  # ERROR
    return a


nki.jit(kernel)(np.ones((128, 512), np.float32))
