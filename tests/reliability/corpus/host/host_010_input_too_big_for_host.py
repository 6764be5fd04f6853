"""Planted error: an input larger than the host's allowance.

Rule: host memory.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: HostMemoryError: the HBM copy of kernel argument 'a' needs 4194304 more bytes of host RAM
import os

import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    pass


os.environ['TRNSIM_HOST_MEMORY_LIMIT'] = '1M'
nki.simulate(kernel)(np.ones((1024, 1024), np.float32))
