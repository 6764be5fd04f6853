"""NKI_PRECISE_FP (nki-api.md §2.2 item 7, §2.5): by default low-precision tiles round like the
hardware; NKI_PRECISE_FP=0 keeps their values as fp32 (trnsim.wide_fp), which is what AWS's
older example tests assume (issue 12: a bf16 activation against an fp32 golden at 1e-5)."""

from __future__ import annotations

import ml_dtypes
import neuronxcc.nki as b1
import neuronxcc.nki.isa as b1isa
import neuronxcc.nki.language as b1nl
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

RNG = np.random.default_rng(70)
B = RNG.uniform(0.0, 100.0, (64, 48)).astype(np.float32)
C = RNG.uniform(0.0, 100.0, (64, 1)).astype(np.float32)
BF16 = ml_dtypes.bfloat16


def _golden() -> np.ndarray:
    """square(2b + c) as the ScalarE computes it: each step in fp32."""
    return np.square(B * np.float32(2.0) + C)


@b1.jit(mode="simulation")
def b1_square(b, c):
    out = b1nl.ndarray(b.shape, dtype=b.dtype, buffer=b1nl.shared_hbm)
    t = b1isa.activation(op=np.square, data=b1nl.load(b), bias=b1nl.load(c), scale=2.0,
                         dtype=b1nl.bfloat16)
    b1nl.store(out, t)
    return out


def test_default_rounds_a_bf16_tile_like_hardware(monkeypatch):
    monkeypatch.delenv("NKI_PRECISE_FP", raising=False)
    got = b1_square(B, C)
    np.testing.assert_array_equal(got, _golden().astype(BF16).astype(np.float32))
    assert not np.allclose(got, _golden(), rtol=1e-5, atol=0)  # bf16 loses ~3 digits


def test_precise_fp_0_keeps_the_fp32_value_of_a_bf16_tile(monkeypatch):
    monkeypatch.setenv("NKI_PRECISE_FP", "0")
    np.testing.assert_array_equal(b1_square(B, C), _golden())
    monkeypatch.setenv("NKI_PRECISE_FP", "1")  # read at each launch
    np.testing.assert_array_equal(b1_square(B, C), _golden().astype(BF16).astype(np.float32))


@nki.jit
def chain(x, w, out_copy, out_mm, out_bf16):
    """x * 3 into a bf16 tile, then: a same-dtype copy and a DMA to fp32 HBM, a matmul with
    the bf16 tile as moving operand, and a DMA to a bf16 HBM tensor."""
    t = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    s = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=s, data=t, op0=nl.multiply, operand0=3.0)
    c = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.tensor_copy(dst=c, src=s)
    nisa.dma_copy(dst=out_copy, src=c)
    wt = nl.ndarray(w.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=wt, src=w)
    p = nl.ndarray((w.shape[1], x.shape[1]), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=p, stationary=wt, moving=s)
    r = nl.ndarray(p.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=r, src=p)
    nisa.dma_copy(dst=out_mm, src=r)
    nisa.dma_copy(dst=out_bf16, src=s)


X = RNG.uniform(-1.0, 1.0, (32, 16)).astype(BF16)
W = RNG.uniform(-1.0, 1.0, (32, 8)).astype(BF16)


def _run_chain():
    outs = (np.zeros((32, 16), np.float32), np.zeros((8, 16), np.float32),
            np.zeros((32, 16), BF16))
    nki.simulate(chain)(X, W, *outs)
    return outs


@pytest.mark.parametrize("precise", ["1", "0"])
def test_kept_values_move_through_copies_and_matmul(monkeypatch, precise):
    monkeypatch.setenv("NKI_PRECISE_FP", precise)
    out_copy, out_mm, out_bf16 = _run_chain()
    tripled = (X.astype(np.float32) * np.float32(3.0))  # exact fp32 product of bf16 inputs
    held = tripled if precise == "0" else tripled.astype(BF16).astype(np.float32)
    np.testing.assert_array_equal(out_copy, held)
    mm = (W.astype(np.float64).T @ held.astype(np.float64)).astype(np.float32)
    np.testing.assert_allclose(out_mm, mm, rtol=1e-6, atol=1e-6)
    # a bf16 result in HBM comes back as bf16: the bytes, rounded
    np.testing.assert_array_equal(out_bf16, tripled.astype(BF16))
    assert precise == "1" or not np.array_equal(held, held.astype(BF16).astype(np.float32))


@nki.jit
def overwritten(x, out):
    """A bf16 tile written with kept values, then partly overwritten by a memset: the new
    bytes show through, the rest keeps its fp32 values."""
    t = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    s = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=s, data=t, op0=nl.multiply, operand0=3.0)
    nisa.memset(dst=s[0:16, 0:8], value=0.5)
    nisa.dma_copy(dst=out, src=s)


def test_a_later_write_by_another_path_shows_through(monkeypatch):
    monkeypatch.setenv("NKI_PRECISE_FP", "0")
    out = np.zeros((32, 16), np.float32)
    nki.simulate(overwritten)(X, out)
    want = X.astype(np.float32) * np.float32(3.0)
    want[0:16, 0:8] = 0.5
    np.testing.assert_array_equal(out, want)
