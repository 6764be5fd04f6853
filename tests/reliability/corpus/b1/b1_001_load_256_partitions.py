"""Planted error: a load of 256 partitions.

Rule: nki-api.md §3.4 TC1; §11 err_num_partition_exceed_arch_limit.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: exceed architecture limitation of 128
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):
    t = nl.load(a.reshape((256, 256)))  # ERROR
    return t


nki.jit(kernel)(np.ones((128, 512), np.float32))
