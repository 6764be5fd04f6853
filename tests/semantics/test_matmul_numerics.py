"""nc_matmul numerics modes: the exact default's fast conversions are bit for bit the plain
numpy ones, and numerics="fast" (fp32 BLAS) is close to exact, deterministic and opt-in."""

from __future__ import annotations

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from trnsim.errors import ConstraintError
from trnsim.semantics import matmul

BF16 = ml_dtypes.bfloat16


@nki.jit
def accumulate_tiles(a_t, b):
    """out = a_t.T @ b: K in 128-row tiles accumulated in one PSUM tile, then copied out."""
    k_dim, m_dim = a_t.shape
    n_dim = b.shape[1]
    out = nl.ndarray((m_dim, n_dim), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((m_dim, n_dim), dtype=nl.float32, buffer=nl.psum)
    for k in nl.affine_range(k_dim // 128):
        at = nl.ndarray((128, m_dim), dtype=a_t.dtype, buffer=nl.sbuf)
        bt = nl.ndarray((128, n_dim), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=at, src=a_t[k * 128 : (k + 1) * 128, :])
        nisa.dma_copy(dst=bt, src=b[k * 128 : (k + 1) * 128, :])
        nisa.nc_matmul(dst=acc, stationary=at, moving=bt)
    res = nl.ndarray((m_dim, n_dim), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    nisa.dma_copy(dst=out, src=res)
    return out


def inputs(rng, dtype, k=512, m=128, n=512, specials=True):
    a = (rng.standard_normal((k, m)) * np.exp2(rng.integers(-20, 20, (k, m)))).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    if specials:  # NaN, Inf and a signalling-NaN bit pattern travel through the sum
        a[3, 5], a[7, 9], b[11, 13] = np.nan, np.inf, -np.inf
        if dtype == BF16:
            b.view(np.uint16)[20, 21] = 0x7F81  # bf16 signalling NaN
    return a, b


def bits(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x).view(np.uint32)


def test_bf16_fill_matches_numpy_for_every_bit_pattern():
    """Every one of the 65536 bf16 patterns widens to the same float64 bits as numpy's cast."""

    class _Core:
        state: dict = {}  # noqa: RUF012  (the scratch pool of one fake core)

    class _View:
        def __init__(self, arr):
            self._arr = arr
            self.dtype = type("D", (), {"name": "bfloat16"})

        def array(self):
            return self._arr

    pats = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(BF16).reshape(256, 256)
    fast = np.empty((256, 256), np.float64)
    matmul._fill_bf16(_Core(), "t", fast, _View(pats))
    plain = np.empty((256, 256), np.float64)
    with np.errstate(invalid="ignore"):
        np.copyto(plain, pats, casting="unsafe")
    np.testing.assert_array_equal(fast.view(np.uint64), plain.view(np.uint64))


@pytest.mark.parametrize("dtype", [BF16, np.float32], ids=["bf16", "fp32"])
def test_exact_default_is_bit_identical_to_plain_numpy_path(rng, dtype, monkeypatch):
    """A 4-deep PSUM accumulation with NaN/Inf planted: the default exact path gives the same
    fp32 bits as converting every input with plain numpy casts (the path before the
    bf16 fast fill)."""
    a, b = inputs(rng, dtype)
    got = nki.simulate(accumulate_tiles, chip="trn2")(a, b)
    monkeypatch.setattr(matmul, "_FILLS", {})
    plain = nki.simulate(accumulate_tiles, chip="trn2")(a, b)
    np.testing.assert_array_equal(bits(got), bits(plain))


@pytest.mark.parametrize("dtype", [BF16, np.float32], ids=["bf16", "fp32"])
def test_exact_matches_float64_reference_per_instruction(rng, dtype):
    """Exact mode: each instruction's float64 K-sum rounded to fp32, then fp32 PSUM adds."""
    a, b = inputs(rng, dtype, specials=False)
    got = nki.simulate(accumulate_tiles, chip="trn2")(a, b)
    acc = np.zeros((128, 512), np.float32)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    for k in range(4):
        part = a64[k * 128 : (k + 1) * 128].T @ b64[k * 128 : (k + 1) * 128]
        acc = acc + part.astype(np.float32)
    np.testing.assert_allclose(got, acc, rtol=3e-7, atol=0)


@pytest.mark.parametrize("dtype", [BF16, np.float32], ids=["bf16", "fp32"])
def test_fast_is_close_deterministic_and_keeps_specials(rng, dtype):
    a, b = inputs(rng, dtype)
    exact = nki.simulate(accumulate_tiles, chip="trn2")(a, b)
    fast1 = nki.simulate(accumulate_tiles, chip="trn2", numerics="fast")(a, b)
    fast2 = nki.simulate(accumulate_tiles, chip="trn2", numerics="fast")(a, b)
    np.testing.assert_array_equal(bits(fast1), bits(fast2))
    np.testing.assert_array_equal(np.isnan(fast1), np.isnan(exact))
    with np.errstate(invalid="ignore"):
        scale = np.abs(a.astype(np.float64)).T @ np.abs(b.astype(np.float64))  # error bound
    finite = np.isfinite(exact)
    err = np.abs(fast1[finite].astype(np.float64) - exact[finite])
    assert np.all(err <= 512 * 2.0**-24 * scale[finite])


def test_fast_is_opt_in_per_jit_and_profile(rng):
    a, b = inputs(rng, np.float32, specials=False)
    fast_kernel = nki.jit(accumulate_tiles.fn, numerics="fast")
    via_jit = fast_kernel.launch((a, b), {}, chip="trn2").device.numerics
    assert via_jit == "fast"
    assert accumulate_tiles.launch((a, b), {}, chip="trn2").device.numerics == "exact"


def test_unknown_numerics_is_refused_with_the_allowed_modes(rng):
    a, b = inputs(rng, np.float32, specials=False)
    with pytest.raises(ConstraintError, match=r"numerics='fp16': allowed 'exact', 'fast'"):
        nki.simulate(accumulate_tiles, chip="trn2", numerics="fp16")(a, b)
