"""benchmarks/heldout_kernels/nkibench_gqa.py: NKIBench's gqa_full baseline, as rewritten for
the calibration set, matches a float64 reference at a small shape (with its nl.loop_reduce
destinations seeded), the unseeded program (the baseline's, which the calibration set times)
is the seeded one without those memsets, and a timing-only profile (values=False, zero-stride
inputs) issues the same program and gives the same latency as a run with values.

The shape: N = 1024, QH = 4, KH = 2, D = 128 (one q load of 4 heads, 2 k/v heads of 2 query
heads each, 8 query tiles, 2 key passes of one 512-key block, 4 key tiles per block). Every
loop of the kernel runs at least twice except the q-chunk and blocks-per-pass loops (once
each: twice needs QH = 16 or N = 2048, 2 to 4 times the ~1,600 instructions here).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import trnsim

from .kernel_files import load

_EPS32 = float(np.finfo(np.float32).eps)
N, QH, KH, D = 1024, 4, 2, 128

gqa_mod = load("nkibench_gqa")


def _signature(instrs) -> list[tuple]:
    return [(i.opcode, i.engine, i.reads, i.writes, i.attrs) for i in instrs]


def _zeros_like(*arrays: np.ndarray) -> list[np.ndarray]:
    return [np.broadcast_to(np.zeros((), a.dtype), a.shape) for a in arrays]


def _inputs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """N(0, 1) as NKIBench draws them, in the layouts its transform_to_nki_inputs makes."""
    rng = np.random.default_rng(0)
    q = rng.standard_normal((N // 128, 128, QH, D)).astype(np.float32)
    k = rng.standard_normal((1, N // 512, 4, 128, KH, D)).astype(np.float32)
    v = rng.standard_normal((1, N // 128, 128, KH * D)).astype(np.float32)
    return q, k, v


def _run(seeded: bool, values: bool):
    args = _inputs() if values else _zeros_like(*_inputs())
    return trnsim.profile(gqa_mod.gqa, *args, chip="trn1", values=values, seed_reductions=seeded)


@pytest.fixture(scope="module")
def profile():
    """One profile per (seed_reductions, values), shared by this module's tests (1-4 s each)."""
    return functools.cache(_run)


def test_gqa_matches_float64(profile):
    """Each probability carries a relative error of about one fp32 ulp (fp32 score sums over
    D, exp, one reciprocal), so each output sum_j p_j v_j is off by about an ulp of
    sum_j p_j |v_j| (the reference on |v|); observed at most 1.0 of those ulps, bound 8."""
    q, k, v = _inputs()
    got = profile(True, values=True).outputs
    ref = gqa_mod.reference(q, k, v)
    assert got.shape == ref.shape == (1, KH, QH // KH, N // 128, 128, D)
    assert got.dtype == np.float32
    scale = gqa_mod.reference(q, k, np.abs(v))
    assert np.all(np.abs(got - ref) <= 8 * _EPS32 * scale)


def test_unseeded_program_is_the_seeded_one_without_its_memsets(profile):
    seeded = _signature(profile(True, values=False).program)
    unseeded = _signature(profile(False, values=False).program)
    matched, extra = 0, []
    for sig in seeded:
        if matched < len(unseeded) and sig == unseeded[matched]:
            matched += 1
        else:
            extra.append(sig[0])  # its opcode
    assert matched == len(unseeded)
    # one fill per block of the row-max and of the row-sum tensor: a block per head and tile
    assert extra == ["memset"] * (2 * QH * (N // 128))


@pytest.mark.parametrize("seeded", [False, True], ids=["baseline", "seeded"])
def test_timing_only_same_program(profile, seeded):
    with_values = profile(seeded, values=True)
    timing = profile(seeded, values=False)
    assert timing.outputs is None
    assert _signature(timing.program) == _signature(with_values.program)
    assert timing.latency_ns == with_values.latency_ns
