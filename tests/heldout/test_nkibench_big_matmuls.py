"""benchmarks/heldout_kernels: NKIBench's swiglu and large matmul baselines, as rewritten for the
calibration set (block tensors kept), match float64 references at small shapes, and a
timing-only profile (values=False, zero-stride inputs) issues the same program and gives the
same latency as a run with values."""

from __future__ import annotations

import numpy as np
import pytest

import trnsim

from .kernel_files import load

_EPS32 = float(np.finfo(np.float32).eps)

swiglu_mod = load("nkibench_swiglu")
matmul_mod = load("nkibench_matmul")


def _signature(prof) -> list[tuple]:
    return [(i.opcode, i.engine, i.reads, i.writes, i.attrs) for i in prof.program]


def _zeros_like(*arrays: np.ndarray) -> list[np.ndarray]:
    return [np.broadcast_to(np.zeros((), a.dtype), a.shape) for a in arrays]


def _swiglu_inputs(rng: np.random.Generator):
    """M = 512 (two row blocks of 2 tiles), K = 256 (two K tiles), N = 2048 (two column
    blocks), K_out = 1024 (two 512-column halves of the output)."""
    x = rng.standard_normal((2, 2, 128, 2, 128)).astype(np.float32)
    w_up = rng.standard_normal((2, 128, 2048)).astype(np.float32)
    w_down = rng.standard_normal((16, 128, 1024)).astype(np.float32)
    w_gate = rng.standard_normal((2, 128, 2048)).astype(np.float32)
    return x, w_up, w_down, w_gate


def _matmul_inputs(rng: np.random.Generator):
    """M = 256 (two row tiles), K = 2048 (two blocks of 8 K tiles), N = 2048 (two blocks)."""
    lhs = rng.standard_normal((2, 128, 16, 128)).astype(np.float32)
    rhs = rng.standard_normal((16, 128, 2048)).astype(np.float32)
    return lhs, rhs


def _swiglu_error_bound(x, w_up, w_down, w_gate) -> np.ndarray:
    """First-order bound on |kernel - float64| per output element.

    Each projection accumulates K/128 matmuls in PSUM, one fp32 rounding each (the simulator
    sums a matmul's 128 products in float64), of partial sums at most |x| @ |w|: |dg| <=
    K/128 * eps/2 * (|x| @ |w_gate|), likewise du. h = silu(g) * u takes them as
    |silu'(g)| * |u| * |dg| + |silu(g)| * |du| (|silu'| < 1.1), plus its own five roundings
    (exp, 1 + e, 1 / d, two multiplies), counted as 4 eps * |h|. The down projection adds its
    N/128 roundings of partial sums at most |h| @ |w_down|, and carries |dh| @ |w_down|.
    """
    n_m_blocks, tiles_per_block, rows, n_k_tiles, cols = x.shape
    x2 = x.astype(np.float64).reshape(n_m_blocks * tiles_per_block * rows, -1)
    wg = w_gate.astype(np.float64).reshape(n_k_tiles * cols, -1)
    wu = w_up.astype(np.float64).reshape(n_k_tiles * cols, -1)
    wd = np.abs(w_down.astype(np.float64).reshape(-1, w_down.shape[2]))
    g, u = x2 @ wg, x2 @ wu
    silu_g = g / (1.0 + np.exp(-g))
    h = np.abs(silu_g * u)
    proj = n_k_tiles * _EPS32 / 2
    x_abs = np.abs(x2)
    dh = 1.1 * np.abs(u) * proj * (x_abs @ np.abs(wg))  # from the gate projection
    dh += np.abs(silu_g) * proj * (x_abs @ np.abs(wu))  # from the up projection
    dh += 4 * _EPS32 * h  # the SiLU chain's own roundings
    bound = dh @ wd + wd.shape[0] // 128 * _EPS32 / 2 * (h @ wd)
    return bound.reshape(-1, 128, w_down.shape[2])


def test_swiglu_matches_float64(rng):
    """fp32 projections, SiLU and down projection: within the bound of _swiglu_error_bound
    (with a factor 2 for its first-order terms)."""
    args = _swiglu_inputs(rng)
    got = swiglu_mod.swiglu(*args)
    ref = swiglu_mod.reference(*args)
    assert got.shape == ref.shape == (4, 128, 1024) and got.dtype == np.float32
    bound = 2 * _swiglu_error_bound(*args)
    worst = np.max(np.abs(got - ref) / bound)
    assert worst <= 1.0, f"error {worst:.3g} x the bound"


def test_matmul_matches_float64(rng):
    """K = 2048 in 16 accumulating matmuls: one fp32 rounding each (the 128 products of a
    matmul are summed in float64; the PE transposes are exact), of partial sums at most
    |lhs| @ |rhs|, so |error| <= 16 * eps/2 * (|lhs| @ |rhs|) per element."""
    lhs, rhs = _matmul_inputs(rng)
    got = matmul_mod.matmul(lhs, rhs)
    ref = matmul_mod.reference(lhs, rhs)
    assert got.shape == ref.shape == (2, 128, 2048) and got.dtype == np.float32
    bound = lhs.shape[2] * _EPS32 / 2 * matmul_mod.reference(np.abs(lhs), np.abs(rhs))
    assert np.all(np.abs(got - ref) <= bound)


@pytest.mark.parametrize(
    ("kernel", "make"),
    [
        pytest.param(swiglu_mod.swiglu, _swiglu_inputs, id="swiglu"),
        pytest.param(matmul_mod.matmul, _matmul_inputs, id="matmul"),
    ],
)
def test_timing_only_same_program(rng, kernel, make):
    args = make(rng)
    with_values = trnsim.profile(kernel, *args, chip="trn1")
    timing = trnsim.profile(kernel, *_zeros_like(*args), chip="trn1", values=False)
    assert timing.outputs is None
    assert _signature(timing) == _signature(with_values)
    assert timing.latency_ns == with_values.latency_ns
