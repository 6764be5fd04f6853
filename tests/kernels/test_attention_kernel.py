"""trnsim.kernels.attention: flash-style attention against the float64 reference."""

from __future__ import annotations

import nki
import numpy as np
import pytest
from kernel_testing import BF16, assert_close, assert_rejected, program_of, randn
from trnsim.kernels import attention as at


def _qkv(rng, d: int, s: int, dtype=BF16):
    return randn(rng, (d, s), dtype), randn(rng, (d, s), dtype), randn(rng, (s, d), dtype)


@pytest.mark.parametrize(
    ("d", "s", "causal", "scale"),
    [
        pytest.param(64, 256, False, None, id="d64-s256"),
        pytest.param(128, 640, True, None, id="d128-s640-causal"),  # ragged last key block
        pytest.param(32, 384, True, 0.3, id="d32-s384-causal-scale"),
        pytest.param(128, 1280, False, None, id="d128-s1280"),  # 10 tiles: groups of 8 and 2
    ],
)
def test_attention_matches_reference(rng, d, s, causal, scale):
    q, k, v = _qkv(rng, d, s)
    out = nki.simulate(at.attention)(q, k, v, scale=scale, causal=causal)
    assert out.dtype == np.dtype(BF16)
    # P is rounded to bf16 before P @ V and the output once more: twice the bf16 rounding.
    assert_close(
        out, at.attention_ref(q, k, v, scale=scale, causal=causal), "bfloat16", 2, abs_frac=1
    )


@pytest.mark.parametrize("chip", ["trn2", "trn1"])
def test_attention_float16_on_older_chips(rng, chip):
    q, k, v = _qkv(rng, 64, 512, np.float16)
    out = nki.simulate(at.attention, chip=chip)(q, k, v, causal=True)
    assert_close(out, at.attention_ref(q, k, v, causal=True), "float16", 2, abs_frac=1)


def test_attention_large_scores_stay_finite(rng):
    """Scores around +-1000 in one row: the running max keeps every exp in range."""
    q, k, v = _qkv(rng, 16, 256)
    q = (q.astype(np.float32) * 40).astype(BF16)
    out = nki.simulate(at.attention)(q, k, v, causal=True)
    assert np.isfinite(out.astype(np.float32)).all()
    assert_close(out, at.attention_ref(q, k, v, causal=True), "bfloat16", 2, abs_frac=1)


def test_attention_causal_skips_future_blocks_and_masks_the_diagonal(rng):
    """S=1024 causal: 8 query tiles see 1, 1, 1, 1, 2, 2, 2, 2 key blocks (12 score matmuls),
    and every block that crosses the diagonal is masked once by affine_select."""
    prog = program_of(at.attention, *_qkv(rng, 128, 1024), causal=True)
    scores = [i for i in prog if i.opcode == "nc_matmul" and i.reads[0].tensor_name == "q_res"]
    masks = [i for i in prog if i.opcode == "affine_select"]
    assert len(scores) == 12
    assert len(masks) == 8


@pytest.mark.parametrize(
    ("shapes", "dtype", "kwargs", "match"),
    [
        pytest.param(((256, 256), (256, 256), (256, 256)), BF16, {}, "d=256", id="d"),
        pytest.param(((64, 200), (64, 200), (200, 64)), BF16, {}, "S=200", id="S"),
        pytest.param(((64, 256), (64, 256), (64, 256)), BF16, {}, "expected q", id="v"),
        pytest.param(((64, 256), (64, 256), (256, 64)), np.float32, {}, "dtypes", id="fp32"),
        pytest.param(
            ((64, 256), (64, 256), (256, 64)), BF16, {"scale": -1.0}, "positive", id="scale"
        ),
        pytest.param(((8, 24576), (8, 24576), (24576, 8)), BF16, {}, "resident", id="long"),
    ],
)
def test_attention_rejects_bad_operands(shapes, dtype, kwargs, match):
    q, k, v = (np.zeros(s, dtype) for s in shapes)
    assert_rejected(match, at.attention, q, k, v, **kwargs)


@pytest.mark.slow
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("d", "s"), [(128, 2048), (128, 4096), (80, 1664)])
def test_attention_long_sequences(d, s, causal):
    rng = np.random.default_rng(s + d)
    q, k, v = _qkv(rng, d, s)
    out = nki.simulate(at.attention)(q, k, v, causal=causal)
    assert_close(out, at.attention_ref(q, k, v, causal=causal), "bfloat16", 2, abs_frac=1)
