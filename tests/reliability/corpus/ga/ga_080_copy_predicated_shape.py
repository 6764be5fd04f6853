"""Planted error: tensor_copy_predicated with a predicate of another shape.

Rule: nki-api.md §7 tensor_copy_predicated.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: operand 'predicate' has shape \(128, 4\) but 'dst' has \(128, 8\)
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    x = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    m = nl.ndarray((128, 4), nl.uint8, buffer=nl.sbuf)
    nisa.memset(dst=x, value=1.0)
    nisa.memset(dst=m, value=1)
    nisa.tensor_copy_predicated(dst=x, src=x, predicate=m)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
