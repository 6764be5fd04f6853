"""Planted error: core_barrier outside an LNC2 launch.

Rule: nki-api.md §7 core_barrier (LNC2 only).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: UnsupportedError: core_barrier: this launch runs one program.*launch the kernel as kernel\[2\]
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((128, 8), nl.float32, buffer=nl.shared_hbm)
    nisa.core_barrier(data=t, cores=(0, 1))  # ERROR


nki.simulate(kernel, chip='trn2')(np.ones((128, 512), np.float32))
