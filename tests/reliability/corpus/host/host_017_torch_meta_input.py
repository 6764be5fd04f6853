"""Planted error: a torch meta tensor input.

Rule: host arrays: CPU tensors.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: ConstraintError: kernel argument 'a' is a torch tensor on device 'meta'; nki.simulate takes CPU tensors
import torch

import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    pass


nki.simulate(kernel)(torch.zeros(4, 4, device='meta'))
