"""races._rows_only: the shortcut that skips the exact byte test for a pair of accesses
whose bytes are exactly the tracker's evenly spaced rows."""

from __future__ import annotations

import numpy as np
import pytest

from trnsim import dtypes as dt
from trnsim.core import Device, operand_record
from trnsim.memory import Layout, View
from trnsim.nki.runner import resolve_chip
from trnsim.timing import races
from trnsim.timing.deps import row_pattern


def operands(seed: int, count: int = 300) -> list:
    """HBM operands of random 1-3 dim layouts (some strides negative or overlapping)."""
    rng = np.random.default_rng(seed)
    device = Device(resolve_chip("trn2"), values=False)
    t = device.allocate_hbm((1 << 16,), dt.bfloat16, name="t")
    out = []
    for _ in range(count):
        ndim = int(rng.integers(1, 4))
        shape = tuple(int(n) for n in rng.integers(1, 9, ndim))
        strides = [int(s) for s in rng.choice([1, 2, 3, 8, 16, 64, 72, -8], ndim)]
        if rng.random() < 0.5:  # often row-major at the inner dims, like a tile slice
            strides[-1] = 1
        span = sum((n - 1) * abs(s) for n, s in zip(shape, strides, strict=True))
        low = -sum((n - 1) * s for n, s in zip(shape, strides, strict=True) if s < 0)
        offset = low + int(rng.integers(0, 1 << 15))
        assert offset - low + span < (1 << 16)
        out.append(operand_record("src", View(t.buffer, Layout(dt.bfloat16, offset, shape,
                                                               tuple(strides)))))
    return out


@pytest.mark.parametrize("seed", range(4))
def test_rows_only_means_the_runs_are_the_tracker_rows(seed):
    hits = 0
    for op in operands(seed):
        pitch, run = row_pattern(op)
        if not pitch or not races._rows_only(op.pattern, op.nbytes, pitch, run):
            continue
        hits += 1
        starts, got_run = races._runs(op)
        rows = op.nbytes // run
        expect = op.region.byte_start + pitch * np.arange(rows)
        assert got_run == run
        np.testing.assert_array_equal(starts, expect)
    assert hits > 10  # the random layouts do reach the shortcut


@pytest.mark.parametrize("seed", range(2))
def test_pitch_test_is_exact_for_two_rows_only_operands(seed):
    ops = [op for op in operands(seed + 10) if row_pattern(op)[0]]
    exact = [op for op in ops if races._rows_only(op.pattern, op.nbytes, *row_pattern(op))]
    checked = 0
    for a in exact:
        for b in exact:
            pa, ra = row_pattern(a)
            pb, rb = row_pattern(b)
            if pa != pb:
                continue
            acc = [races._Access(o.region.byte_start, o.region.byte_end, p, r, 0, True, 0, "")
                   for o, p, r in ((a, pa, ra), (b, pb, rb))]
            assert races._overlap(*acc) == races.exact_overlap(a, b)
            checked += 1
    assert checked > 20
