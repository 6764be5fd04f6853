"""Planted error: a gridded kernel called inside a kernel.

Rule: §11 err_nested_kernel_with_spmd_grid.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: KernelError: calling inner\[2\]\(\) inside another kernel is not supported.*err_nested_kernel_with_spmd_grid
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


@nki.jit
def inner(a):
    return a


def kernel(a):
    inner[2](a)  # ERROR
    return a


nki.jit(kernel)(np.ones((128, 512), np.float32))
