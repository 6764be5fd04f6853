"""benchmarks/heldout_kernels: NKIBench's silu and adamw baselines, as rewritten for the held-out
timing check, match float64 references, and a timing-only profile (values=False, zero-stride
inputs) issues the same program and gives the same latency as a run with values."""

from __future__ import annotations

import numpy as np
import pytest

import trnsim

from .kernel_files import load

silu_mod = load("nkibench_silu")
adamw_mod = load("nkibench_adamw")


def _silu_input(rng: np.random.Generator) -> np.ndarray:
    """NKIBench's layout at a small size: [256, 2048] reshaped to [128, 2, 2048], N(0, 1)."""
    return rng.standard_normal((256, 2048)).astype(np.float32).reshape(128, 2, 2048)


def _adamw_inputs(rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """theta, g, m ~ N(0, 1), v = |N(0, 1)| as in NKIBench; 192 rows: a masked last tile."""
    theta, g, m, v = (rng.standard_normal((192, 2048)).astype(np.float32) for _ in range(4))
    return theta, g, m, np.abs(v)


def _signature(prof) -> list[tuple]:
    return [(i.opcode, i.engine, i.reads, i.writes, i.attrs) for i in prof.program]


def test_silu_matches_float64(rng):
    """fp32 exp, reciprocal and products: a few fp32 ulps of x / (1 + exp(-x))."""
    x = _silu_input(rng)
    got = silu_mod.silu(x)
    assert got.shape == x.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, silu_mod.reference(x), rtol=2e-6, atol=1e-7)


def test_silu_extremes():
    """exp(100) overflows fp32 to inf and 1 / inf = 0, so silu(-100) is -0 (float64: -4e-42);
    x >> 0 gives x; zeros stay zero."""
    x = np.zeros((128, 1, 1024), np.float32)
    x[:, 0, :4] = [-100.0, -20.0, 20.0, 100.0]
    got = silu_mod.silu(x)
    np.testing.assert_allclose(
        got[0, 0, :4], silu_mod.reference(x[0, 0, :4]), rtol=2e-6, atol=1e-37
    )
    assert np.all(got[:, 0, 4:] == 0)


def test_adamw_matches_float64(rng):
    """Every row is written, including the 64-row masked last tile."""
    args = _adamw_inputs(rng)
    got = adamw_mod.adamw(*args)
    assert got.shape == (192, 2048) and got.dtype == np.float32
    want = adamw_mod.reference(*args)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("case", ["silu", "adamw"])
def test_timing_only_profile_equals_run_with_values(rng, case):
    if case == "silu":
        kernel, args, reference = silu_mod.silu, (_silu_input(rng),), silu_mod.reference
    else:
        kernel, args, reference = adamw_mod.adamw, _adamw_inputs(rng), adamw_mod.reference
    with_values = trnsim.profile(kernel, *args, chip="trn1")
    np.testing.assert_allclose(with_values.outputs, reference(*args), rtol=2e-6, atol=1e-7)
    zeros = [np.broadcast_to(np.zeros((), np.float32), a.shape) for a in args]
    timing_only = trnsim.profile(kernel, *zeros, chip="trn1", values=False)
    assert timing_only.outputs is None
    assert _signature(timing_only) == _signature(with_values)
    assert timing_only.latency_ns == with_values.latency_ns > 0


def test_instruction_mix_follows_the_baselines(rng):
    """Per 512-column chunk: silu 1 exp (ScalarE) + 3 VectorE ops; adamw 7 tensor_scalar,
    6 tensor_tensor, 1 sqrt (ScalarE), 1 reciprocal; one load/store per 1024 columns each."""
    zeros = np.broadcast_to(np.zeros((), np.float32), (128, 2, 2048))
    prof = trnsim.profile(silu_mod.silu, zeros, chip="trn1", values=False)
    chunks = 2 * 2048 // 512
    ops = [(i.opcode, i.engine) for i in prof.program]
    assert ops.count(("activation", "scalar")) == chunks
    assert ops.count(("tensor_scalar", "vector")) == chunks
    assert ops.count(("reciprocal", "vector")) == chunks
    assert ops.count(("tensor_tensor", "vector")) == chunks
    assert ops.count(("dma_copy", "dma")) == 2 * chunks // 2  # a load and a store per 1024
    assert ops.count(("memset", "vector")) == 1

    zeros = np.broadcast_to(np.zeros((), np.float32), (192, 2048))
    prof = trnsim.profile(adamw_mod.adamw, *[zeros] * 4, chip="trn1", values=False)
    chunks = 2 * 2048 // 512  # two row tiles (the second masked to 64 rows)
    ops = [(i.opcode, i.engine) for i in prof.program]
    assert ops.count(("tensor_scalar", "vector")) == 7 * chunks
    assert ops.count(("tensor_tensor", "vector")) == 6 * chunks
    assert ops.count(("activation", "scalar")) == chunks
    assert ops.count(("reciprocal", "vector")) == chunks
    assert ops.count(("dma_copy", "dma")) == 5 * chunks // 2  # 4 loads + 1 store per 1024
    last = [i for i in prof.program if i.opcode == "activation"][-1]
    assert last.reads[0].partitions == 64
