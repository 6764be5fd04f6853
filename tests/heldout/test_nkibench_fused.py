"""benchmarks/heldout_kernels: NKIBench's rmsnorm_matmul, rope, add_rmsnorm_matmul and
matmul_add_rmsnorm baselines, as rewritten for the held-out timing check, match float64
references at small shapes, and a timing-only profile (values=False, zero-stride inputs) issues
the same program and gives the same latency as a run with values."""

from __future__ import annotations

import numpy as np
import pytest

import trnsim

from .kernel_files import load

_EPS32 = float(np.finfo(np.float32).eps)


rmm_mod = load("nkibench_rmsnorm_matmul")
rope_mod = load("nkibench_rope")


def _rmm_inputs(rng: np.random.Generator, k: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    """NKIBench's layouts at M=1024, N=1024: x [M/128, 128, K], w [K/128, 128, N], N(0, 1).
    K=1024 gives two 512-column chunks, so nl.loop_reduce really sums."""
    x = rng.standard_normal((8, 128, k)).astype(np.float32)
    w = rng.standard_normal((k // 128, 128, 1024)).astype(np.float32)
    return x, w


def _rope_inputs(rng: np.random.Generator, d_head: int = 128, s: int = 2048):
    x = rng.standard_normal((d_head, s)).astype(np.float32)
    cos = rng.standard_normal((d_head // 2, s)).astype(np.float32)
    sin = rng.standard_normal((d_head // 2, s)).astype(np.float32)
    return x, cos, sin


def _signature(prof) -> list[tuple]:
    return [(i.opcode, i.engine, i.reads, i.writes, i.attrs) for i in prof.program]


def _zeros_like(*arrays: np.ndarray) -> list[np.ndarray]:
    return [np.broadcast_to(np.zeros((), a.dtype), a.shape) for a in arrays]


@pytest.mark.parametrize("k", [512, 1024])
def test_rmsnorm_matmul_matches_float64(rng, k):
    """fp32 statistics, fp32 PE transposes and matmuls: within a few fp32 ulps of the largest
    output (a sum of K products of magnitude ~1)."""
    x, w = _rmm_inputs(rng, k)
    got = rmm_mod.rmsnorm_matmul(x, w)
    ref = rmm_mod.reference(x, w)
    assert got.shape == ref.shape == (8, 128, 1024) and got.dtype == np.float32
    np.testing.assert_allclose(got, ref, rtol=0, atol=64 * _EPS32 * np.abs(ref).max())


def test_rmsnorm_matmul_scale_invariance(rng):
    """RMSNorm removes each row's scale: rows multiplied by 2**10 and 2**-10 give the same
    output (exact powers of two, so up to the same fp32 rounding)."""
    x, w = _rmm_inputs(rng)
    scaled = x * np.where(np.arange(128) % 2 == 0, 2.0**10, 2.0**-10).astype(np.float32)[:, None]
    np.testing.assert_allclose(
        rmm_mod.rmsnorm_matmul(scaled, w), rmm_mod.rmsnorm_matmul(x, w), rtol=1e-5, atol=1e-4
    )


@pytest.mark.parametrize("d_head", [128, 64])
def test_rope_matches_float64(rng, d_head):
    """Two fp32 products and one sum per output: within 2 ulps of the sum of the magnitudes."""
    x, cos, sin = _rope_inputs(rng, d_head)
    got = rope_mod.rope(x, cos, sin)
    ref = rope_mod.reference(x, cos, sin)
    assert got.shape == x.shape and got.dtype == np.float32
    half = d_head // 2
    mag = np.concatenate(
        [np.abs(x[:half] * cos) + np.abs(x[half:] * sin),
         np.abs(x[half:] * cos) + np.abs(x[:half] * sin)]
    ).astype(np.float64)  # fmt: skip
    assert np.all(np.abs(got - ref) <= 2 * _EPS32 * mag + 1e-37)


def test_rope_rotation_preserves_norm(rng):
    """With cos = cos(a), sin = sin(a), each (lower, upper) pair keeps its length."""
    x, _, _ = _rope_inputs(rng, s=512)
    angle = rng.uniform(-np.pi, np.pi, (64, 512))
    got = rope_mod.rope(x, np.cos(angle).astype(np.float32), np.sin(angle).astype(np.float32))
    np.testing.assert_allclose(
        np.hypot(got[:64], got[64:]), np.hypot(x[:64], x[64:]), rtol=1e-6, atol=1e-6
    )


def test_rmsnorm_matmul_timing_only_same_program(rng):
    x, w = _rmm_inputs(rng)
    with_values = trnsim.profile(rmm_mod.rmsnorm_matmul, x, w, chip="trn1")
    timing = trnsim.profile(rmm_mod.rmsnorm_matmul, *_zeros_like(x, w), chip="trn1", values=False)
    assert timing.outputs is None
    assert _signature(timing) == _signature(with_values)
    assert timing.latency_ns == with_values.latency_ns


def test_rope_timing_only_same_program(rng):
    args = _rope_inputs(rng)
    with_values = trnsim.profile(rope_mod.rope, *args, chip="trn1")
    timing = trnsim.profile(rope_mod.rope, *_zeros_like(*args), chip="trn1", values=False)
    assert timing.outputs is None
    assert _signature(timing) == _signature(with_values)
    assert timing.latency_ns == with_values.latency_ns


arm_mod = load("nkibench_add_rmsnorm_matmul")


def _arm_inputs(rng: np.random.Generator):
    """M=256, K=256, N=1024: two row tiles, two K tiles, two 512-column chunks."""
    x, z = (rng.standard_normal((256, 256)).astype(np.float32) for _ in range(2))
    w = rng.standard_normal((256, 1024)).astype(np.float32)
    g = rng.standard_normal(256).astype(np.float32)
    return x, w, z, g


def test_add_rmsnorm_matmul_matches_float64(rng):
    """fp32 add, statistics and matmuls: within a few fp32 ulps of the largest output."""
    args = _arm_inputs(rng)
    got = arm_mod.add_rmsnorm_matmul(*args)
    ref = arm_mod.reference(*args)
    assert got.shape == ref.shape == (256, 1024) and got.dtype == np.float32
    np.testing.assert_allclose(got, ref, rtol=0, atol=64 * _EPS32 * np.abs(ref).max())


def test_add_rmsnorm_matmul_timing_only_same_program(rng):
    args = _arm_inputs(rng)
    with_values = trnsim.profile(arm_mod.add_rmsnorm_matmul, *args, chip="trn1")
    timing = trnsim.profile(
        arm_mod.add_rmsnorm_matmul, *_zeros_like(*args), chip="trn1", values=False
    )
    assert _signature(timing) == _signature(with_values)
    assert timing.latency_ns == with_values.latency_ns


mar_mod = load("nkibench_matmul_add_rmsnorm")


def _mar_inputs(rng: np.random.Generator):
    """M=256, K=256, N=1024: two row tiles, two K tiles, two 512-column chunks of N."""
    x = rng.standard_normal((256, 256)).astype(np.float32)
    w = rng.standard_normal((256, 1024)).astype(np.float32)
    z = rng.standard_normal((256, 1024)).astype(np.float32)
    g = rng.standard_normal(1024).astype(np.float32)
    return x, w, z, g


def test_matmul_add_rmsnorm_matches_float64(rng):
    """fp32 matmuls (sums of 256 products), add and statistics: the normalised rows are of
    magnitude ~|g|, within a few fp32 ulps of the largest output."""
    args = _mar_inputs(rng)
    got = mar_mod.matmul_add_rmsnorm(*args)
    ref = mar_mod.reference(*args)
    assert got.shape == ref.shape == (256, 1024) and got.dtype == np.float32
    np.testing.assert_allclose(got, ref, rtol=0, atol=64 * _EPS32 * np.abs(ref).max())


def test_matmul_add_rmsnorm_normalises_each_row(rng):
    """With g = 1 every output row has mean square 1 (up to eps and fp32 rounding)."""
    x, w, z, _ = _mar_inputs(rng)
    got = mar_mod.matmul_add_rmsnorm(x, w, z, np.ones(1024, np.float32)).astype(np.float64)
    np.testing.assert_allclose(np.mean(got * got, axis=1), 1.0, rtol=1e-5)


def test_matmul_add_rmsnorm_timing_only_same_program(rng):
    args = _mar_inputs(rng)
    with_values = trnsim.profile(mar_mod.matmul_add_rmsnorm, *args, chip="trn1")
    timing = trnsim.profile(
        mar_mod.matmul_add_rmsnorm, *_zeros_like(*args), chip="trn1", values=False
    )
    assert _signature(timing) == _signature(with_values)
    assert timing.latency_ns == with_values.latency_ns
