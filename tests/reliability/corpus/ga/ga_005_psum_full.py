"""Planted error: more PSUM tiles alive than PSUM holds.

Rule: nki-api.md §3.1 (8 banks x 2 KiB). The eight tiles are written before and read after
the ninth is made, so all nine are alive at once (a tile not used yet holds no space: the
compiler allocates from first to last use, trnsim.nki.liveness).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: AllocationError: psum: cannot allocate 2048 bytes per partition x 128 partitions: requested 2048, free 0
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    tiles = [nl.ndarray((128, 512), nl.float32, buffer=nl.psum) for _ in range(8)]
    for t in tiles:
        nisa.memset(dst=t, value=0.0)
    extra = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)  # ERROR
    nisa.memset(dst=extra, value=0.0)
    s = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
    for t in tiles:
        nisa.tensor_copy(dst=s, src=t)


nki.simulate(kernel)(np.ones((128, 512), np.float32))
