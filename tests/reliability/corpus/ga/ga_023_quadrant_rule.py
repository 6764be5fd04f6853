"""Planted error: a 40-partition access starting at partition 16.

Rule: nki-api.md §3.5 start-partition rule.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: memset: operand 'dst' spans 40 partitions starting at partition 16; an access of 40 partitions must start at partition 0 or 64 \(quadrant rule\)
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    x = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=x[16:56], value=1.0)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
