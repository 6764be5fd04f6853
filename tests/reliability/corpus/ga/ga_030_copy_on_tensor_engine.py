"""Planted error: tensor_copy on the Tensor Engine.

Rule: nki-api.md §7 tensor_copy engines.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: tensor_copy: cannot run on the tensor engine; allowed engines: vector, gpsimd, scalar
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=0.0)
    nisa.tensor_copy(dst=t, src=t, engine=nisa.tensor_engine)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
