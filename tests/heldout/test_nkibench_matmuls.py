"""benchmarks/heldout_kernels: NKIBench's bmm, transpose_matmul and mamba baselines, as
rewritten for the calibration set, match float64 references at small shapes, and a timing-only
profile (values=False, zero-stride inputs) issues the same program and gives the same latency
as a run with values."""

from __future__ import annotations

import numpy as np
import pytest

import trnsim

from .kernel_files import load

_EPS32 = float(np.finfo(np.float32).eps)

bmm_mod = load("nkibench_bmm")
tmm_mod = load("nkibench_transpose_matmul")
mamba_mod = load("nkibench_mamba")


def _signature(prof) -> list[tuple]:
    return [(i.opcode, i.engine, i.reads, i.writes, i.attrs) for i in prof.program]


def _zeros_like(*arrays: np.ndarray) -> list[np.ndarray]:
    return [np.broadcast_to(np.zeros((), a.dtype), a.shape) for a in arrays]


def _bmm_inputs(rng: np.random.Generator):
    """Two batches, M = 1024 (one row block), K = 64, N = 2048 (two column blocks)."""
    lhs = rng.standard_normal((2, 1024, 64)).astype(np.float32)
    rhs = rng.standard_normal((2, 64, 2048)).astype(np.float32)
    return lhs, rhs


def _tmm_inputs(rng: np.random.Generator):
    """K = 256 (two K tiles), M = 1024, N = 1600: a full and a 576-column block (512 + 64)."""
    lhs = rng.standard_normal((128, 2, 1024)).astype(np.float32)
    rhs = rng.standard_normal((128, 2, 1600)).astype(np.float32)
    return lhs, rhs


def _mamba_inputs(rng: np.random.Generator):
    """256 channels (two tiles), 512 positions, 4 states, N(0, 0.05) as NKIBench draws them."""
    shapes = ((256, 512), (256, 512), (256, 4), (4, 512), (4, 512))
    return [rng.normal(scale=0.05, size=s).astype(np.float32) for s in shapes]


def test_bmm_matches_float64(rng):
    """fp32 PE transposes (exact) and K = 64 products: within a few ulps of the largest output."""
    lhs, rhs = _bmm_inputs(rng)
    got = bmm_mod.bmm(lhs, rhs)
    ref = bmm_mod.reference(lhs, rhs)
    assert got.shape == ref.shape == (2, 8, 128, 2048) and got.dtype == np.float32
    np.testing.assert_allclose(got, ref, rtol=0, atol=16 * _EPS32 * np.abs(ref).max())


def test_transpose_matmul_matches_float64(rng):
    """Sums of K = 256 fp32 products, the narrow last block included."""
    lhs, rhs = _tmm_inputs(rng)
    got = tmm_mod.transpose_matmul(lhs, rhs)
    ref = tmm_mod.reference(lhs, rhs)
    assert got.shape == ref.shape == (8, 128, 1600) and got.dtype == np.float32
    np.testing.assert_allclose(got, ref, rtol=0, atol=32 * _EPS32 * np.abs(ref).max())


def test_mamba_matches_float64(rng):
    """The fp32 scan over 512 positions and the sum over 4 states."""
    args = _mamba_inputs(rng)
    got = mamba_mod.mamba(*args)
    ref = mamba_mod.reference(*args)
    assert got.shape == ref.shape == (256, 512) and got.dtype == np.float32
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


def test_mamba_with_zero_decay_input_is_a_running_sum(rng):
    """delta * a = 0 makes every decay exp(0) = 1: h is the running sum of delta * b * u."""
    delta, u, a, b, c = _mamba_inputs(rng)
    got = mamba_mod.mamba(delta, u, np.zeros_like(a), b, c)
    drive = delta[:, None, :] * b[None] * u[:, None, :]  # [C, S, L]
    ref = np.sum(c[None] * np.cumsum(drive.astype(np.float64), axis=2), axis=1)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


@pytest.mark.parametrize(
    ("kernel", "make"),
    [
        pytest.param(bmm_mod.bmm, _bmm_inputs, id="bmm"),
        pytest.param(tmm_mod.transpose_matmul, _tmm_inputs, id="transpose_matmul"),
        pytest.param(mamba_mod.mamba, _mamba_inputs, id="mamba"),
    ],
)
def test_timing_only_same_program(rng, kernel, make):
    args = make(rng)
    with_values = trnsim.profile(kernel, *args, chip="trn1")
    timing = trnsim.profile(kernel, *_zeros_like(*args), chip="trn1", values=False)
    assert timing.outputs is None
    assert _signature(timing) == _signature(with_values)
    assert timing.latency_ns == with_values.latency_ns
