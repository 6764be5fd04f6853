"""Planted error: an access pattern past the tensor.

Rule: nki-api.md §4.2 .ap(). The pattern is checked where an instruction uses it (a pattern
made but never used, e.g. under an untaken branch, moves no byte: nki-library's
output_projection_tkg.py makes one): the error names the operand, at the same line.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: OutOfBoundsError: dma_copy operand 'src': elements \[65536, 130563\] of hbm tensor 'arg0' are outside \[0, 65535\]
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    t = nl.ndarray((128, 4), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a.ap([[512, 128], [1, 4]], offset=512 * 128))  # ERROR


nki.simulate(kernel)(np.ones((128, 512), np.float32))
