"""Planted error: a mutable parameter not returned.

Rule: §11 err_mutable_parameter_not_returned.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: KernelError: err_mutable_parameter_not_returned
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt


def kernel(a: nt.mutable_tensor):  # ERROR
    nl.store(a, value=nl.load(a))


nki.jit(kernel)(np.ones((128, 512), np.float32))
