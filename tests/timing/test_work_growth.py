"""The timing passes do the same work per instruction however long the program is.

A count, not a time: the Python lines executed in trnsim/timing/ (the hidden-hazard and race
passes of a launch, dependencies, the compiler's order, the event loop) per simulated
instruction, at N and 4N instructions of one loop. A pass that compares each new region with
every earlier one (the hidden-hazard pass once did: its time per instruction grew 5x from 768
to 3072 column blocks) makes the ratio grow with N; speed targets live in benchmarks/.
"""

from __future__ import annotations

import os
import sys

import ml_dtypes
import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from trnsim.nki.jit import _as_kernel
from trnsim.timing.reorder import schedule

_TIMING = os.sep + os.path.join("trnsim", "timing") + os.sep


@nki.jit
def _column_blocks(x):
    """exp over [128, 512] column blocks of a [128, F] tensor: strided HBM rows."""
    rows, free = x.shape
    y = nl.ndarray((rows, free), dtype=x.dtype, buffer=nl.shared_hbm)
    for c in nl.affine_range(free // 512):
        t = nl.ndarray((rows, 512), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[:, c * 512 : (c + 1) * 512])
        nisa.activation(dst=t, op=nl.exp, data=t)
        nisa.dma_copy(dst=y[:, c * 512 : (c + 1) * 512], src=t)
    return y


@nki.jit
def _row_blocks(x):
    """y = exp(x) * x on [128, F] row blocks of a [R, F] tensor."""
    rows, free = x.shape
    y = nl.ndarray((rows, free), dtype=x.dtype, buffer=nl.shared_hbm)
    for r in nl.affine_range(rows // 128):
        t = nl.ndarray((128, free), dtype=x.dtype, buffer=nl.sbuf)
        e = nl.ndarray((128, free), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[r * 128 : (r + 1) * 128, :])
        nisa.activation(dst=e, op=nl.exp, data=t)
        nisa.tensor_tensor(dst=e, data1=e, data2=t, op=nl.multiply)
        nisa.dma_copy(dst=y[r * 128 : (r + 1) * 128, :], src=e)
    return y


def _timing_lines(fn) -> int:
    """Lines executed in trnsim/timing/ modules while fn() runs."""
    count = 0

    def local(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return local

    def calls(frame, event, arg):
        return local if _TIMING in frame.f_code.co_filename else None

    old = sys.gettrace()
    sys.settrace(calls)
    try:
        fn()
    finally:
        sys.settrace(old)
    return count


def _lines_per_instruction(kernel, shape) -> float:
    x = np.broadcast_to(np.zeros((), ml_dtypes.bfloat16), shape)
    k = _as_kernel(kernel)
    runs = []
    launch = _timing_lines(lambda: runs.append(k.launch((x,), {}, chip="trn2", values=False)))
    run = runs[0]
    sched = _timing_lines(lambda: schedule(run.program, run.chip))
    return (launch + sched) / len(run.program)


@pytest.mark.parametrize(
    ("kernel", "shape"),
    [
        pytest.param(_column_blocks, lambda m: (128, 512 * 96 * m), id="column-blocks"),
        pytest.param(_row_blocks, lambda m: (128 * 48 * m, 512), id="row-blocks"),
    ],
)
def test_timing_work_per_instruction_does_not_grow(kernel, shape):
    """Lines per instruction at 4N are within 10 % of those at N (one-time work, such as
    reading the cost records, is done by a warm-up run first)."""
    _lines_per_instruction(kernel, shape(1))
    small = _lines_per_instruction(kernel, shape(1))
    large = _lines_per_instruction(kernel, shape(4))
    assert large / small < 1.1, (small, large)
