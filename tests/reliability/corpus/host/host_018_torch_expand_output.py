"""Planted error: writing an expanded torch tensor.

Rule: host arrays: elements sharing memory.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: KernelError: has elements that share memory
import torch

import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a, o):
    t = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.dma_copy(dst=o, src=t)  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32), torch.zeros(1, 512).expand(128, 512))
