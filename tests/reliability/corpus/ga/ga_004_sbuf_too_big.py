"""Planted error: an SBUF tile larger than a partition.

Rule: nki-api.md §3.1 (SBUF per partition).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: AllocationError: sbuf: cannot allocate 400000 bytes per partition x 128 partitions: requested 400000 bytes per partition but a partition holds \d+ usable bytes
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((128, 100000), nl.float32, buffer=nl.sbuf)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
