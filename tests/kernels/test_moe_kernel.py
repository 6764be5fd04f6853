"""trnsim.kernels.moe: top-2 MoE FFN against the float64 reference."""

from __future__ import annotations

import nki
import numpy as np
import pytest
from kernel_testing import BF16, assert_close, assert_rejected, randn
from trnsim.kernels import moe


def _weights(rng, t: int, h: int, e: int, f: int, dtype=BF16):
    x = randn(rng, (t, h), dtype)
    w_router = randn(rng, (h, e), dtype, scale=h**-0.5 * 4)  # well separated logits
    w_gate = randn(rng, (e, h, f), dtype, scale=h**-0.5)
    w_up = randn(rng, (e, h, f), dtype, scale=h**-0.5)
    w_down = randn(rng, (e, f, h), dtype, scale=f**-0.5)
    return x, w_router, w_gate, w_up, w_down


@pytest.mark.parametrize(
    ("t", "h", "e", "f"),
    [
        pytest.param(128, 128, 4, 256, id="T128-H128-E4"),  # fewer experts than max8's 8
        pytest.param(256, 256, 8, 128, id="T256-H256-E8"),
    ],
)
def test_moe_matches_reference(rng, t, h, e, f):
    args = _weights(rng, t, h, e, f)
    out = nki.simulate(moe.moe_ffn)(*args)
    assert out.dtype == np.dtype(BF16)
    # h is rounded to bf16 before the down projection, the output once more.
    assert_close(out, moe.moe_ffn_ref(*args), "bfloat16", 2, abs_frac=1)


def test_moe_tied_logits_pick_two_experts(rng):
    """A zero router makes every logit equal: nc_find_index8 hands out experts 0 and 1 and
    the gate weights are 1/2 each, as in the reference (ties to the lower index)."""
    x, _, w_gate, w_up, w_down = _weights(rng, 128, 128, 4, 128)
    w_router = np.zeros((128, 4), BF16)
    out = nki.simulate(moe.moe_ffn)(x, w_router, w_gate, w_up, w_down)
    want = moe.moe_ffn_ref(x, w_router, w_gate, w_up, w_down)
    assert_close(out, want, "bfloat16", 2, abs_frac=1)


@pytest.mark.parametrize(
    ("shapes", "match"),
    [
        pytest.param(
            ((100, 128), (128, 4), (4, 128, 128), (4, 128, 128), (4, 128, 128)),
            "T=100",
            id="tokens",
        ),
        pytest.param(
            ((128, 128), (128, 1), (1, 128, 128), (1, 128, 128), (1, 128, 128)),
            "E=1",
            id="one-expert",
        ),
        pytest.param(
            ((128, 128), (128, 4), (4, 128, 256), (4, 128, 256), (4, 128, 128)),
            "w_down has shape",
            id="down",
        ),
    ],
)
def test_moe_rejects_bad_operands(shapes, match):
    args = [np.zeros(s, BF16) for s in shapes]
    assert_rejected(match, moe.moe_ffn, *args)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("t", "h", "e", "f", "dtype"),
    [
        pytest.param(640, 640, 16, 256, BF16, id="ragged-token-and-hidden-chunks"),
        pytest.param(256, 128, 32, 384, np.float32, id="fp32-E32"),
    ],
)
def test_moe_larger_shapes(t, h, e, f, dtype):
    rng = np.random.default_rng(t + e)
    args = _weights(rng, t, h, e, f, dtype)
    out = nki.simulate(moe.moe_ffn)(*args)
    assert_close(out, moe.moe_ffn_ref(*args), np.dtype(dtype).name, 2, abs_frac=1)
