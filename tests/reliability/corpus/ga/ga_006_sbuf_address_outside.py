"""Planted error: an explicit SBUF address past the partition.

Rule: nki-api.md §3.3 address=.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: AllocationError: sbuf: address \(partition 0, byte 10000000\) with 128 partitions x 16 bytes is outside
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((128, 4), nl.float32, buffer=nl.sbuf, address=(0, 10**7))  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
