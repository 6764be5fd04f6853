"""Planted error: nl.load outside a kernel.

Rule: §11 err_nki_api_outside_of_nki_kernel.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: KernelError: nl.load: calling NKI API outside of NKI kernels is not supported.*err_nki_api_outside_of_nki_kernel
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a):
    return a


nl.load(np.ones((128, 512), np.float32))  # ERROR
