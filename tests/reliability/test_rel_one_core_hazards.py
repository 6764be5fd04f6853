"""Races and stale reads on one core (issue 13.6): HBM accesses whose patterns alias
differently, so that the dependency tracker's row-pitch model takes them for disjoint, are
reported at the later access's line, as the cross-core race check reports its pairs."""

from __future__ import annotations

import inspect
import warnings

import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

import trnsim
from trnsim.errors import SimulationWarning
from trnsim.nki.runner import run_kernel
from trnsim.program import Operand, Region
from trnsim.timing.races import exact_overlap, find_hidden_hazards

A = np.arange(16, dtype=np.float32).reshape(1, 16)


def hazard_kernel(a, order=False, same_shape=False, write_twice=False):
    """h is written whole, then elements 0, 2, 10, 12 through a 3-level pattern (which looks
    like rows of pitch 16 bytes at phase 0), then elements 2, 6, 10 are read (pitch 16 bytes,
    phase 8): they share elements 2 and 10, yet the pitch model calls them disjoint."""
    h = nl.ndarray((1, 16), nl.float32, buffer=nl.shared_hbm, name="h")
    t = nl.ndarray((1, 16), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.dma_copy(dst=h, src=t)
    w = nl.ndarray((1, 4), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=w, value=7.0)
    wrote = nisa.dma_copy(dst=h.ap([[16, 1], [10, 2], [2, 2]], offset=0), src=w)  # WRITE
    r = nl.ndarray((1, 3), nl.float32, buffer=nl.sbuf)
    if write_twice:
        nisa.memset(dst=r, value=1.0)
        nisa.dma_copy(dst=h.ap([[16, 1], [4, 3]], offset=2), src=r)  # HAZARD write
    elif same_shape:
        r4 = nl.ndarray((1, 4), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=r4, src=h.ap([[16, 1], [10, 2], [2, 2]], offset=0))
        nisa.tensor_copy(dst=r, src=r4[:, 0:3])
    else:
        read = nisa.dma_copy(dst=r, src=h.ap([[16, 1], [4, 3]], offset=2))  # HAZARD read
        if order:
            read.depends_on(wrote)
    out = nl.ndarray((1, 3), nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=r)
    return out


def line(marker):
    src, start = inspect.getsourcelines(hazard_kernel)
    return start + next(i for i, s in enumerate(src) if marker in s)


def hazard_warnings(**opts):
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        run = run_kernel(hazard_kernel, (A,), opts, chip="trn2")
    return run, [w for w in got if issubclass(w.category, SimulationWarning)
                 and "alias differently" in str(w.message)]


def test_read_through_a_differently_aliasing_view_is_reported():
    run, got = hazard_warnings()
    assert len(got) == 1
    w = got[0]
    assert w.lineno == line("# HAZARD read") and w.filename == __file__
    text = str(w.message)
    assert text.startswith("dma_copy reads bytes [")
    where = f"{__file__.rsplit('/', 1)[-1]}:{line('# WRITE')}"
    assert f"of HBM tensor 'h' that dma_copy at {where} writes" in text
    # values are computed in program order: elements 2, 6, 10 after the write of 0/2/10/12
    np.testing.assert_array_equal(run.outputs, [[7.0, 6.0, 7.0]])


def test_the_timeline_indeed_overlaps_the_pair():
    """What the warning is about: the tracker gave the read no wait on the write."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SimulationWarning)
        prof = trnsim.profile(hazard_kernel, A, chip="trn2")
    (h,) = find_hidden_hazards(prof.program)
    assert prof.start_ns(h.second) < prof.end_ns(h.first)
    assert h.first not in [d[0] for d in prof.timeline.deps[h.second]]


def test_write_write_pair_is_reported():
    _, got = hazard_warnings(write_twice=True)
    assert len(got) == 1
    assert str(got[0].message).startswith("dma_copy writes bytes [")
    assert got[0].lineno == line("# HAZARD write")


def test_explicit_dependency_silences_the_report():
    run, got = hazard_warnings(order=True)
    assert got == []
    assert find_hidden_hazards(run.program) == []


def test_views_of_one_shape_are_not_reported():
    _, got = hazard_warnings(same_shape=True)
    assert got == []


def test_library_kernel_has_no_hidden_hazard():
    from trnsim.kernels import matmul

    a = np.ones((512, 512), np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SimulationWarning)
        prof = trnsim.profile(matmul.matmul, a, a, chip="trn2", values=False)
    assert find_hidden_hazards(prof.program) == []


def hbm(start, end, pattern, nbytes, run):
    region = Region("hbm", -1, 0, 1, start, end)
    return Operand("x", region, "float32", (nbytes // 4,), 1, nbytes // 4, nbytes, 4, run,
                   "h", pattern)


@pytest.mark.parametrize(("a", "b", "expected"), [
    # elements 0,2,10,12 vs 2,6,10 (bytes): share 8 and 40
    (hbm(0, 52, (0, ((40, 2), (8, 2))), 16, 4), hbm(8, 44, (0, ((16, 3),)), 12, 4), True),
    # elements 0,2,10,12 vs 4,8: disjoint
    (hbm(0, 52, (0, ((40, 2), (8, 2))), 16, 4), hbm(16, 36, (0, ((16, 2),)), 8, 4), False),
    # contiguous rows of 16 bytes, pitch 64, vs a column at byte 20 of each row: disjoint
    (hbm(0, 208, (0, ((64, 4), (4, 4))), 64, 16), hbm(20, 216, (0, ((64, 4),)), 16, 4), False),
    # ... and at byte 12: shared
    (hbm(0, 208, (0, ((64, 4), (4, 4))), 64, 16), hbm(12, 208, (0, ((64, 4),)), 16, 4), True),
    # a reversed row (negative stride): first byte is the highest
    (hbm(0, 16, (12, ((-4, 4),)), 16, 4), hbm(12, 16, (0, ((4, 1),)), 4, 4), True),
])
def test_exact_overlap(a, b, expected):
    assert exact_overlap(a, b) is expected
    assert exact_overlap(b, a) is expected
