"""Planted error: tile_position without tile_size.

Rule: nki-api.md §7 nc_matmul tiling.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: set both tile_position and tile_size
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    s = nl.ndarray((32, 32), nl.bfloat16, buffer=nl.sbuf)
    v = nl.ndarray((32, 32), nl.bfloat16, buffer=nl.sbuf)
    nisa.memset(dst=s, value=1.0)
    nisa.memset(dst=v, value=1.0)
    p = nl.ndarray((32, 32), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=p, stationary=s, moving=v, tile_position=(0, 0))  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
