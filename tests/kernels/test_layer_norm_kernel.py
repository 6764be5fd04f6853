"""trnsim.kernels.layer_norm: LayerNorm and RMSNorm device kernels, forward and backward, on
strided [R, D] views against float64 references."""

from __future__ import annotations

import numpy as np
import pytest
from kernel_testing import BF16, assert_close, randn
from trnsim.kernels import layer_norm as ln
from views_testing import assert_rejected_views, launch, strided_of, transposed

SHAPES = [
    pytest.param(1, 8, id="1x8"),
    pytest.param(7, 33, id="7x33"),
    pytest.param(129, 20, id="129x20"),
    pytest.param(1000, 24, id="1000x24"),  # 8 rows per partition
    pytest.param(130, 700, id="130x700"),
]
AFFINE = [
    pytest.param(True, True, id="w-b"),
    pytest.param(False, False, id="no-affine"),
    pytest.param(True, False, id="w-only"),
    pytest.param(False, True, id="b-only"),
]


def _x(rng, r, d, dtype=np.float32):
    return (rng.standard_normal((r, d)) * 2.0 + 1.0).astype(dtype)


def _vec(rng, d, on, dtype=np.float32):
    return rng.standard_normal(d).astype(dtype) if on else None


def _ln_forward(x, w, b, eps=1e-5, out_dtype=None):
    r = x.shape[0]
    out = np.zeros(x.shape, out_dtype or x.dtype)
    mean, rstd = np.zeros(r, np.float32), np.zeros(r, np.float32)
    return launch(ln.layer_norm_forward, out, mean, rstd, x, w, b, eps=eps)[:3]


@pytest.mark.parametrize(("r", "d"), SHAPES)
@pytest.mark.parametrize(("has_w", "has_b"), AFFINE)
def test_layer_norm_forward(rng, r, d, has_w, has_b):
    x, w, b = _x(rng, r, d), _vec(rng, d, has_w), _vec(rng, d, has_b)
    out, mean, rstd = _ln_forward(x, w, b)
    y, mu, rs = ln.layer_norm_ref(x, w, b)
    assert_close(out, y, "float32", 4)
    assert_close(mean, mu, "float32", 2)
    assert_close(rstd, rs, "float32", 2)


@pytest.mark.parametrize(("r", "d"), SHAPES)
@pytest.mark.parametrize("has_w", [True, False], ids=["w", "no-w"])
def test_rms_norm_forward(rng, r, d, has_w):
    x, w = _x(rng, r, d), _vec(rng, d, has_w)
    out, rstd = np.zeros(x.shape, np.float32), np.zeros(r, np.float32)
    got = launch(ln.rms_norm_forward, out, rstd, x, w, eps=None)
    y, rs = ln.rms_norm_ref(x, w)  # eps None: finfo(float32).eps, as torch
    assert_close(got[0], y, "float32", 4)
    assert_close(got[1], rs, "float32", 2)


@pytest.mark.parametrize(
    ("x_dtype", "w_dtype"),
    [
        pytest.param(BF16, np.float32, id="bf16-x"),
        pytest.param(BF16, BF16, id="bf16-x-w"),
        pytest.param(np.float16, np.float16, id="fp16"),
    ],
)
def test_forward_half_dtypes(rng, x_dtype, w_dtype):
    x, w, b = _x(rng, 200, 96, x_dtype), _vec(rng, 96, True, w_dtype), _vec(rng, 96, True, w_dtype)
    out, mean, rstd = _ln_forward(x, w, b)
    assert out.dtype == np.dtype(x_dtype)
    y, mu, rs = ln.layer_norm_ref(x, w, b)
    assert_close(out, y, np.dtype(x_dtype).name, 2)
    assert_close(mean, mu, "float32", 2)  # statistics stay fp32
    assert_close(rstd, rs, "float32", 2)


def test_forward_strided_views_and_keepdim_stats(rng):
    """x stored transposed, out a column slice of a wider buffer, mean/rstd as [R, 1]."""
    xv, xs = transposed(rng, (50, 40), np.float32, (1, 0))
    out_base = np.zeros((50, 48), np.float32)
    w = _vec(rng, 40, True)
    got = launch(
        ln.layer_norm_forward,
        strided_of(out_base, out_base[:, 3:43]),
        np.zeros((50, 1), np.float32),
        np.zeros((50, 1), np.float32),
        xs,
        w,
        None,
        eps=1e-3,
    )
    y, mu, rs = ln.layer_norm_ref(xv, w, None, eps=1e-3)
    assert_close(got[0], y, "float32", 4)
    assert_close(got[1][:, 0], mu, "float32", 2)
    assert_close(got[2][:, 0], rs, "float32", 2)


def test_forward_statistics_optional(rng):
    x = _x(rng, 20, 30)
    got = launch(ln.layer_norm_forward, np.zeros_like(x), None, None, x, None, None, eps=1e-5)
    assert_close(got[0], ln.layer_norm_ref(x)[0], "float32", 4)


@pytest.mark.parametrize("rms", [False, True], ids=["layer_norm", "rms_norm"])
def test_forward_long_rows_in_chunks(rng, monkeypatch, rms):
    monkeypatch.setattr(ln, "MAX_CHUNK_COLS", 64)
    x, w, b = _x(rng, 9, 300), _vec(rng, 300, True), _vec(rng, 300, True)
    if rms:
        out, rstd = np.zeros(x.shape, np.float32), np.zeros(9, np.float32)
        got = launch(ln.rms_norm_forward, out, rstd, x, w, eps=1e-6)
        assert_close(got[0], ln.rms_norm_ref(x, w, 1e-6)[0], "float32", 4)
    else:
        assert_close(_ln_forward(x, w, b)[0], ln.layer_norm_ref(x, w, b)[0], "float32", 4)


# ---------------------------------------------------------------- backward
def _bwd_case(rng, r, d, has_w, rms, dtype=np.float32):
    x, g, w = _x(rng, r, d, dtype), randn(rng, (r, d), dtype), _vec(rng, d, has_w)
    if rms:
        mu, rs = None, ln.rms_norm_ref(x, w)[1]
    else:
        _, mu, rs = ln.layer_norm_ref(x, w)
        mu = mu.astype(np.float32)
    return x, g, w, mu, rs.astype(np.float32)


def _ln_backward(x, g, w, mu, rs, want=(True, True, True), gx_dtype=None):
    d = x.shape[1]
    gx = np.zeros(x.shape, gx_dtype or x.dtype) if want[0] else None
    gw = np.zeros(d, np.float32) if want[1] else None
    gb = np.zeros(d, np.float32) if want[2] else None
    return launch(ln.layer_norm_backward, gx, gw, gb, g, x, mu, rs, w)[:3]


@pytest.mark.parametrize(("r", "d"), SHAPES)
@pytest.mark.parametrize("has_w", [True, False], ids=["w", "no-w"])
def test_layer_norm_backward(rng, r, d, has_w):
    x, g, w, mu, rs = _bwd_case(rng, r, d, has_w, rms=False)
    got = _ln_backward(x, g, w, mu, rs)
    want = ln.norm_backward_ref(g, x, mu, rs, w)
    for a, b in zip(got, want, strict=True):
        assert_close(a, b, "float32", 4, abs_frac=1)


@pytest.mark.parametrize(("r", "d"), SHAPES)
def test_rms_norm_backward(rng, r, d):
    x, g, w, _, rs = _bwd_case(rng, r, d, True, rms=True)
    gx, gw = np.zeros_like(x), np.zeros(d, np.float32)
    got = launch(ln.rms_norm_backward, gx, gw, g, x, rs, w)
    want = ln.norm_backward_ref(g, x, None, rs, w)
    assert_close(got[0], want[0], "float32", 4, abs_frac=1)
    assert_close(got[1], want[1], "float32", 4, abs_frac=1)


@pytest.mark.parametrize(
    "want",
    [
        pytest.param((False, True, True), id="no-grad-x"),
        pytest.param((True, False, False), id="grad-x-only"),
        pytest.param((False, False, True), id="grad-bias-only"),
    ],
)
def test_layer_norm_backward_some_outputs(rng, want):
    x, g, w, mu, rs = _bwd_case(rng, 300, 40, True, rms=False)
    got = _ln_backward(x, g, w, mu, rs, want)
    ref = ln.norm_backward_ref(g, x, mu, rs, w)
    for on, a, b in zip(want, got, ref, strict=True):
        if on:
            assert_close(a, b, "float32", 4, abs_frac=1)
        else:
            assert a is None


def test_backward_bf16(rng):
    x, g, w, mu, rs = _bwd_case(rng, 260, 64, True, rms=False, dtype=BF16)
    got = _ln_backward(x, g, w, mu, rs)
    want = ln.norm_backward_ref(g, x, mu, rs, w)
    assert got[0].dtype == np.dtype(BF16)
    assert_close(got[0], want[0], "bfloat16", 2, abs_frac=1)
    assert_close(got[1], want[1], "float32", 4, abs_frac=1)  # fp32 accumulators, fp32 out
    assert_close(got[2], want[2], "float32", 4, abs_frac=1)


@pytest.mark.parametrize("rms", [False, True], ids=["layer_norm", "rms_norm"])
@pytest.mark.parametrize("grad_x", [True, False], ids=["all", "no-grad-x"])
def test_backward_long_rows_in_chunks(rng, monkeypatch, rms, grad_x):
    monkeypatch.setattr(ln, "MAX_CHUNK_COLS", 64)
    x, g, w, mu, rs = _bwd_case(rng, 130, 200, True, rms)
    gx = np.zeros_like(x) if grad_x else None
    gw = np.zeros(200, np.float32)
    if rms:
        got = launch(ln.rms_norm_backward, gx, gw, g, x, rs, w)[:2]
    else:
        got = launch(ln.layer_norm_backward, gx, gw, None, g, x, mu, rs, w)[:2]
    want = ln.norm_backward_ref(g, x, mu, rs, w)
    if grad_x:
        assert_close(got[0], want[0], "float32", 4, abs_frac=1)
    assert_close(got[1], want[1], "float32", 4, abs_frac=1)


def test_backward_strided_grad_out(rng):
    gv, gs = transposed(rng, (70, 30), np.float32, (1, 0))
    x, _, w, mu, rs = _bwd_case(rng, 70, 30, True, rms=False)
    got = launch(
        ln.layer_norm_backward, np.zeros_like(x), np.zeros(30, np.float32), None, gs, x, mu, rs, w
    )
    want = ln.norm_backward_ref(gv, x, mu, rs, w)
    assert_close(got[0], want[0], "float32", 4, abs_frac=1)
    assert_close(got[1], want[1], "float32", 4, abs_frac=1)


@pytest.mark.parametrize("rms", [False, True], ids=["layer_norm", "rms_norm"])
def test_references_match_torch(rng, rms):
    torch = pytest.importorskip("torch")
    x = torch.tensor(rng.standard_normal((5, 12)), requires_grad=True)
    w = torch.tensor(rng.standard_normal(12), requires_grad=True)
    b = torch.tensor(rng.standard_normal(12), requires_grad=True)
    g = torch.tensor(rng.standard_normal((5, 12)))
    if rms:
        y = torch.nn.functional.rms_norm(x, (12,), w, eps=None)
        ref_y, rs = ln.rms_norm_ref(x.detach().numpy(), w.detach().numpy())
        mu = None
    else:
        y = torch.nn.functional.layer_norm(x, (12,), w, b, eps=1e-5)
        ref_y, mu, rs = ln.layer_norm_ref(
            x.detach().numpy(), w.detach().numpy(), b.detach().numpy()
        )
    np.testing.assert_allclose(ref_y, y.detach().numpy(), rtol=1e-6, atol=1e-6)
    grads = torch.autograd.grad(y, (x, w) if rms else (x, w, b), g)
    ref = ln.norm_backward_ref(g.numpy(), x.detach().numpy(), mu, rs, w.detach().numpy())
    for a, b_ in zip(ref, grads, strict=False):
        np.testing.assert_allclose(a, b_.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        pytest.param(dict(x=(2, 3, 4)), "2-D", id="rank"),
        pytest.param(dict(w=(5,)), r"weight must have shape \[D\]=\[4\]", id="weight-shape"),
        pytest.param(dict(dtype=np.int32), "dtype int32", id="dtype"),
        pytest.param(dict(mean=(3,)), "mean must hold one value per row", id="mean-shape"),
    ],
)
def test_forward_rejects(args, match):
    xs = args.get("x", (6, 4))
    dtype = args.get("dtype", np.float32)
    x = np.zeros(xs, dtype)
    mean = np.zeros(args.get("mean", (xs[0],)), np.float32)
    w = np.zeros(args.get("w", (xs[-1],)), np.float32)
    assert_rejected_views(
        match,
        ln.layer_norm_forward,
        np.zeros(xs, dtype),
        mean,
        np.zeros(xs[0], np.float32),
        x,
        w,
        None,
        eps=1e-5,
    )


def test_backward_needs_the_statistics():
    x = np.zeros((4, 4), np.float32)
    assert_rejected_views(
        "mean, rstd",
        ln.layer_norm_backward,
        np.zeros_like(x),
        None,
        None,
        x,
        x,
        None,
        np.ones(4, np.float32),
        None,
    )


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_random_shapes(seed):
    rng = np.random.default_rng(900 + seed)
    r, d = int(rng.integers(1, 1500)), int(rng.integers(1, 3000))
    dtype = (np.float32, BF16)[seed % 2]
    x, w, b = _x(rng, r, d, dtype), _vec(rng, d, seed % 3 != 0), _vec(rng, d, seed % 2 == 0)
    assert_close(_ln_forward(x, w, b)[0], ln.layer_norm_ref(x, w, b)[0], np.dtype(dtype).name, 4)
    x, g, w, mu, rs = _bwd_case(rng, r, d, True, rms=bool(seed % 2))
    got = (
        _ln_backward(x, g, w, mu, rs)
        if mu is not None
        else launch(ln.rms_norm_backward, np.zeros_like(x), np.zeros(d, np.float32), g, x, rs, w)
    )
    want = ln.norm_backward_ref(g, x, mu, rs, w)
    assert_close(got[0], want[0], "float32", 4, abs_frac=1)
    assert_close(got[1], want[1], "float32", 8, abs_frac=1)


@pytest.mark.parametrize("grad_x", [True, False], ids=["all", "no-grad-x"])
def test_backward_wide_rows_accumulate_by_column_blocks(rng, monkeypatch, grad_x):
    """Accumulators of whole rows do not fit: the weight/bias gradients take one more sweep
    per block of 512 columns (a small ACC_SHARE stands in for D in the tens of thousands)."""
    from trnsim.kernels import _norm_rows

    monkeypatch.setattr(_norm_rows, "ACC_SHARE", 0.02)
    x, g, w, mu, rs = _bwd_case(rng, 140, 1100, True, rms=False)
    got = _ln_backward(x, g, w, mu, rs, (grad_x, True, True))
    want = ln.norm_backward_ref(g, x, mu, rs, w)
    for on, a, b in zip((grad_x, True, True), got, want, strict=True):
        if on:
            assert_close(a, b, "float32", 4, abs_frac=1)


@pytest.mark.parametrize("chip", ["trn1", "trn2"])
def test_other_chips(rng, chip):
    x, g, w, mu, rs = _bwd_case(rng, 130, 40, True, rms=False)
    out, mean, rstd = np.zeros_like(x), np.zeros(130, np.float32), np.zeros(130, np.float32)
    got = launch(ln.layer_norm_forward, out, mean, rstd, x, w, w, eps=1e-5, chip=chip)
    assert_close(got[0], ln.layer_norm_ref(x, w, w)[0], "float32", 4)
    got = launch(
        ln.layer_norm_backward,
        np.zeros_like(x),
        np.zeros(40, np.float32),
        None,
        g,
        x,
        mu,
        rs,
        w,
        chip=chip,
    )
    want = ln.norm_backward_ref(g, x, mu, rs, w)
    assert_close(got[0], want[0], "float32", 4, abs_frac=1)
    assert_close(got[1], want[1], "float32", 4, abs_frac=1)
