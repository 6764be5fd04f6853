"""Planted error: NEURON_PLATFORM_TARGET_OVERRIDE naming no platform.

Rule: nki-api.md §2.5.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: NEURON_PLATFORM_TARGET_OVERRIDE='trn9' is not a platform \(known: trn1
import os
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    pass


os.environ['NEURON_PLATFORM_TARGET_OVERRIDE'] = 'trn9'
nki.simulate(kernel)(np.ones((128, 512), np.float32))  # ERROR
