"""examples/beta1/sd_attention.py: the fused Stable-Diffusion self-attention kernel matches a
float64 softmax(q k^T * 0.125) v, and its timing-only profile equals a run with values."""

from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest

import trnsim

_PATH = pathlib.Path(__file__).resolve().parents[2] / "examples" / "beta1" / "sd_attention.py"


def _load_example():
    spec = importlib.util.spec_from_file_location("sd_attention_example", _PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


sd = _load_example()


@pytest.fixture(scope="module")
def qkv():
    rng = np.random.default_rng(7)
    return tuple(rng.standard_normal((256, 64)).astype(np.float32) for _ in range(3))


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_mixed_precision_matches_float64(qkv, causal):
    """bf16 Tensor Engine operands (8 significant bits) with fp32 PSUM and softmax: errors
    stay within a few bf16 ulps of the output scale (|out| <= max|v| ~ 4)."""
    q, k, v = qkv
    got = sd.sd_attention(q, k, v, use_causal_mask=causal)
    assert got.shape == (256, 64) and got.dtype == np.float32
    want = sd.reference(q, k, v, use_causal_mask=causal)
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)
    assert np.abs(got - want).mean() < 2e-3


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_fp32_path_matches_float64(qkv, causal):
    q, k, v = qkv
    got = sd.sd_attention(q, k, v, use_causal_mask=causal, mixed_precision=False)
    np.testing.assert_allclose(
        got, sd.reference(q, k, v, use_causal_mask=causal), rtol=1e-4, atol=1e-5
    )


def test_timing_only_profile_equals_run_with_values():
    """trn1, seqlen 1024: values=False issues the same program and gives the same latency."""
    rng = np.random.default_rng(0)
    q, k, v = (rng.random((1024, 64)).astype(np.float32) for _ in range(3))
    with_values = trnsim.profile(sd.sd_attention, q, k, v, chip="trn1")
    np.testing.assert_allclose(with_values.outputs, sd.reference(q, k, v), rtol=1e-3, atol=1e-3)
    zeros = np.broadcast_to(np.float32(0), (1024, 64))  # no memory behind a timing-only run
    timing_only = trnsim.profile(sd.sd_attention, zeros, zeros, zeros, chip="trn1", values=False)
    assert timing_only.outputs is None
    assert [(i.opcode, i.engine, i.reads, i.writes, i.attrs) for i in timing_only.program] == [
        (i.opcode, i.engine, i.reads, i.writes, i.attrs) for i in with_values.program
    ]
    assert timing_only.latency_ns == with_values.latency_ns > 0
    counts = timing_only.instruction_counts
    n = 1024 // 128
    assert counts[(0, "tensor_matrix")] == 2 * n * n + n * n + n  # 2 matmuls, 2 transposes
    # one exp per query block (counted by opcode: the ScalarE row also holds engine=unknown
    # work the compiler rules place there, timing/compiler.py)
    assert sum(ins.opcode == "activation" for ins in timing_only.program) == n
