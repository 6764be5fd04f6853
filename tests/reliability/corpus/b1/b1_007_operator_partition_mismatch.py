"""Planted error: x + y with different partition counts.

Rule: §11 err_num_partition_mismatch.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: number of partitions \(dimension 0 size of a tile\) mismatch in parameters \(x\[128, 512\], y\[1, 512\]\) of 'add'.*\[err_num_partition_mismatch\]
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):
    x = nl.load(a)
    y = nl.load(a[0:1, :])
    z = x + y  # ERROR
    return a


nki.jit(kernel)(np.ones((128, 512), np.float32))
