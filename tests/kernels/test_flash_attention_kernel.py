"""trnsim.kernels.flash_attention: SDPA forward (out, lse) and backward over strided views,
against float64 references and torch.autograd (float64, CPU)."""

from __future__ import annotations

import numpy as np
import pytest
from kernel_testing import BF16, assert_close, randn
from torch_testing import torch_or_skip
from trnsim.kernels import flash_attention as fa
from views_testing import assert_rejected_views, launch, strided_of, transposed


def _inputs(rng, b, h, hkv, sq, skv, d, dtype, layout="bhsd"):
    """q, k, v (numpy values) and their kernel arguments; layout 'bshd' stores them as
    [B, S, H, D] and passes the [B, H, S, D] permuted view (q.transpose(1, 2) in torch)."""
    vals, args = [], []
    for shape in ((b, h, sq, d), (b, hkv, skv, d), (b, hkv, skv, d)):
        if layout == "bshd":
            x, arg = transposed(rng, shape, dtype, (0, 2, 1, 3))
        else:
            x = arg = randn(rng, shape, dtype)
        vals.append(x)
        args.append(arg)
    return vals, args


def _mask(rng, kind, shape, dtype):
    """A bool (True keeps) or additive float mask with one fully masked query row."""
    if kind == "bool":
        m = rng.random(shape) > 0.4
        m[..., 0, :] = False
        return m
    m = randn(rng, shape, dtype)
    m[..., 1, :] = -np.inf
    m[..., 2, ::3] = -np.inf
    return m


def _forward(rng, dims, dtype=np.float32, causal=False, mask=None, layout="bhsd", chip="trn3",
             scale=None):
    b, h, hkv, sq, skv, d = dims
    (q, k, v), args = _inputs(rng, b, h, hkv, sq, skv, d, dtype, layout)
    scale = 1 / np.sqrt(d) if scale is None else scale
    out, lse = np.zeros((b, h, sq, d), dtype), np.zeros((b, h, sq), np.float32)
    kw = {"scale": scale, "causal": causal}
    if mask is None:
        got = launch(lambda o, ls, x, y, z: fa.flash_attention(o, ls, x, y, z, **kw),
                     out, lse, *args, chip=chip)
    else:
        got = launch(lambda o, ls, x, y, z, m: fa.flash_attention(o, ls, x, y, z, attn_mask=m,
                                                                        **kw),
                     out, lse, *args, mask, chip=chip)
    ref_out, ref_lse = fa.flash_attention_ref(q, k, v, scale, causal, mask)
    name = np.dtype(dtype).name
    # P is rounded to the input dtype before P @ V and the output once more.
    assert_close(got[0], ref_out, name, 2, abs_frac=1)
    lse_tol = 1e-5 if name == "float32" else 2**-7
    np.testing.assert_allclose(got[1], ref_lse, rtol=lse_tol, atol=lse_tol)
    return got


@pytest.mark.parametrize(
    ("dims", "dtype", "causal", "layout"),
    [
        pytest.param((1, 1, 1, 1, 1, 1), np.float32, False, "bhsd", id="1x1"),
        pytest.param((1, 2, 1, 3, 5, 8), np.float32, False, "bshd", id="gqa-3x5"),
        pytest.param((2, 4, 2, 129, 127, 32), np.float32, True, "bhsd", id="causal-129x127"),
        pytest.param((1, 2, 2, 130, 600, 64), np.float32, True, "bshd", id="causal-sq<skv"),
        pytest.param((1, 1, 1, 300, 100, 16), np.float32, True, "bhsd", id="causal-sq>skv"),
        pytest.param((1, 2, 1, 300, 520, 128), BF16, True, "bshd", id="bf16-d128"),
        pytest.param((1, 1, 1, 127, 513, 64), BF16, False, "bhsd", id="bf16-513"),
    ],
)
def test_flash_attention_forward(rng, dims, dtype, causal, layout):
    _forward(rng, dims, dtype, causal, layout=layout)


@pytest.mark.parametrize("kind", ["bool", "float"])
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_masks_with_fully_masked_rows(rng, kind, causal):
    """Masks broadcast over batch or heads; a fully masked row gives out 0 and lse 0."""
    dims = (2, 2, 1, 70, 200, 16)
    shape = (2, 1, 70, 200) if kind == "bool" else (1, 2, 70, 200)
    mask = _mask(rng, kind, shape, np.float32)
    got = _forward(rng, dims, np.float32, causal, mask)
    empty = 0 if kind == "bool" else 1
    assert (got[0][:, :, empty] == 0).all()
    assert (got[1][:, :, empty] == 0).all()


def test_flash_attention_padding_mask_and_odd_scales(rng):
    """A [B, 1, 1, Skv] key-padding mask (stride 0 over heads and queries); scale <= 0."""
    keep = rng.random((2, 1, 1, 90)) > 0.3
    m = strided_of(keep, np.broadcast_to(keep, (2, 3, 40, 90)))
    for scale in (-0.3, 0.0):
        (q, k, v), args = _inputs(rng, 2, 3, 3, 40, 90, 8, np.float32)
        out, lse = np.zeros((2, 3, 40, 8), np.float32), np.zeros((2, 3, 40), np.float32)
        got = launch(lambda o, ls, x, y, z, mm, s=scale: fa.flash_attention(
            o, ls, x, y, z, scale=s, causal=False, attn_mask=mm), out, lse, *args, m)
        ro, rl = fa.flash_attention_ref(q, k, v, scale, False, m.expected())
        assert_close(got[0], ro, "float32", 2, abs_frac=1)
        np.testing.assert_allclose(got[1], rl, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("chip", ["trn2", "trn1"])
def test_flash_attention_older_chips(rng, chip):
    _forward(rng, (1, 2, 1, 140, 260, 64), BF16, True, layout="bshd", chip=chip)


def _backward(rng, dims, dtype=np.float32, causal=False, mask=None, layout="bhsd", chip="trn3"):
    b, h, hkv, sq, skv, d = dims
    (q, k, v), args = _inputs(rng, b, h, hkv, sq, skv, d, dtype, layout)
    do = randn(rng, (b, h, sq, d), dtype)
    scale = 1 / np.sqrt(d)
    o, lse = fa.flash_attention_ref(q, k, v, scale, causal, mask)
    grads = [np.zeros((b, h, sq, d), dtype), np.zeros((b, hkv, skv, d), dtype),
             np.zeros((b, hkv, skv, d), dtype)]
    rest = [do, *args, o.astype(dtype), lse.astype(np.float32)]
    kw = {"scale": scale, "causal": causal}
    if mask is None:
        got = launch(lambda *t: fa.flash_attention_backward(*t, **kw), *grads, *rest, chip=chip)
    else:
        got = launch(lambda *t: fa.flash_attention_backward(*t[:-1], attn_mask=t[-1], **kw),
                     *grads, *rest, mask, chip=chip)
    ref = fa.flash_attention_backward_ref(q, k, v, do, scale, causal, mask)
    for g, r in zip(got[:3], ref, strict=True):
        assert_close(g, r, np.dtype(dtype).name, 4, abs_frac=1)
    return (q, k, v, do, mask, scale), got[:3]


@pytest.mark.parametrize(
    ("dims", "dtype", "causal", "mask"),
    [
        pytest.param((1, 1, 1, 1, 1, 1), np.float32, False, None, id="1x1"),
        pytest.param((1, 2, 2, 130, 300, 64), np.float32, True, None, id="causal"),
        pytest.param((2, 4, 2, 129, 127, 32), np.float32, False, "bool", id="gqa-bool"),
        pytest.param((1, 2, 1, 200, 600, 16), np.float32, True, "float", id="gqa-causal-float"),
        pytest.param((1, 1, 1, 50, 700, 16), np.float32, True, None, id="unseen-keys"),
        pytest.param((1, 1, 1, 300, 520, 128), BF16, True, None, id="bf16-d128"),
    ],
)
def test_flash_attention_backward(rng, dims, dtype, causal, mask):
    m = None if mask is None else _mask(rng, mask, (1, 1, dims[3], dims[4]), np.float32)
    _backward(rng, dims, dtype, causal, m, layout="bshd")


def test_flash_attention_matches_torch_autograd(rng):
    """Forward, lse and all three gradients against torch's SDPA (math path, float64) with a
    bool mask holding a fully masked row and GQA; lse against torch's CPU flash kernel."""
    torch = torch_or_skip()
    dims = (1, 4, 2, 33, 70, 16)
    mask = _mask(rng, "bool", (1, 1, 33, 70), np.float32)
    (q, k, v, do, _, scale), grads = _backward(rng, dims, np.float32, False, mask)
    tq, tk, tv = (torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in (q, k, v))
    out = torch.nn.functional.scaled_dot_product_attention(
        tq, tk, tv, attn_mask=torch.tensor(mask), scale=scale, enable_gqa=True)
    out.backward(torch.tensor(do, dtype=torch.float64))
    for g, t in zip(grads, (tq, tk, tv), strict=True):
        assert_close(g, t.grad.numpy(), "float32", 4, abs_frac=1)
    fwd = _forward(rng, (1, 2, 2, 33, 70, 16), np.float32, False, mask)
    _, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        *(torch.tensor(x) for x in fwd[2:5]), 0.0, False,
        attn_mask=torch.where(torch.tensor(mask), 0.0, float("-inf")), scale=scale)
    np.testing.assert_allclose(fwd[1], lse.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("shapes", "dtypes", "kw", "match"),
    [
        pytest.param(((1, 1, 4, 130),) * 4, "ffff", {}, "D=130 exceeds 128", id="d"),
        pytest.param(((1, 3, 4, 8), (1, 3, 4), (1, 3, 4, 8), (1, 2, 5, 8)), "ffff", {},
                     "multiple of Hkv", id="gqa"),
        pytest.param(((1, 1, 4, 8), (1, 1, 4), (1, 1, 4, 8), (1, 1, 5, 8)), "fbff", {},
                     "lse has dtype bfloat16", id="lse-dtype"),
        pytest.param(((1, 1, 4, 8), (1, 1, 4), (1, 1, 4, 8), (1, 1, 5, 8)), "ffbf", {},
                     "q, k, v have dtypes", id="mixed"),
        pytest.param(((1, 1, 4, 8), (1, 1, 5), (1, 1, 4, 8), (1, 1, 5, 8)), "ffff", {},
                     "lse has shape", id="lse-shape"),
        pytest.param(((1, 1, 4, 8), (1, 1, 4), (1, 1, 4, 8), (1, 1, 5, 8)), "ffff",
                     {"scale": float("inf")}, "finite", id="scale"),
    ],
)
def test_flash_attention_rejects_bad_operands(shapes, dtypes, kw, match):
    dt = {"f": np.float32, "b": BF16}
    o_s, l_s, q_s, k_s = shapes
    if len(l_s) == 4:  # the D case: every operand [1, 1, 4, 130]
        l_s = (1, 1, 4)
    out = np.zeros(o_s, dt[dtypes[0]])
    lse = np.zeros(l_s, dt[dtypes[1]])
    q = np.zeros(q_s, dt[dtypes[2]])
    k = np.zeros(k_s, dt[dtypes[3]])
    attrs = {"scale": 0.5, "causal": False, **kw}
    assert_rejected_views(match, fa.flash_attention, out, lse, q, k, k.copy(), **attrs)


def test_flash_attention_rejects_int_mask():
    z = np.zeros((1, 1, 4, 8), np.float32)
    lse = np.zeros((1, 1, 4), np.float32)
    attrs = {"scale": 0.5, "causal": False}
    assert_rejected_views("attn_mask has dtype int32", fa.flash_attention, z, lse, z, z, z,
                          attn_mask=np.zeros((4, 4), np.int32), **attrs)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_flash_attention_random_shapes(seed):
    rng = np.random.default_rng(500 + seed)
    hkv = int(rng.integers(1, 3))
    dims = (1, hkv * int(rng.integers(1, 3)), hkv, *(int(x) for x in rng.integers(1, 700, 2)),
            int(rng.choice([8, 64, 100, 128])))
    dtype = (np.float32, BF16)[seed % 2]
    causal = bool(seed % 3 == 0)
    mask = None if seed % 3 else _mask(rng, "bool", (1, 1, dims[3], dims[4]), np.float32)
    if mask is not None and dims[3] < 3:
        mask = None
    _forward(rng, dims, dtype, causal, mask, layout="bshd")
    _backward(rng, dims, dtype, causal, mask, layout="bshd")
