"""trnsim.kernels.losses: nll_loss and fused cross_entropy device kernels, forward and
backward, against float64 references (and the references against torch)."""

from __future__ import annotations

import numpy as np
import pytest
from kernel_testing import BF16, assert_close, randn
from trnsim.kernels import _loss_rows
from trnsim.kernels import losses as ls
from views_testing import assert_rejected_views, launch, transposed

IGNORE = -100
SHAPES = [
    pytest.param(5, 7, id="5x7"),
    pytest.param(130, 20, id="130x20"),
    pytest.param(1000, 10, id="1000x10"),  # several rows per partition
    pytest.param(3, 700, id="3x700"),
]
REDS = [pytest.param(0, id="none"), pytest.param(1, id="mean"), pytest.param(2, id="sum")]


def pairs(t) -> np.ndarray:
    """int64 targets as the int32 pair view the backend passes (shape S + (2,))."""
    t = np.atleast_1d(np.asarray(t, np.int64))
    return np.ascontiguousarray(t).view(np.int32).reshape(*t.shape, 2)


def _case(rng, n, c, weighted, ignore=IGNORE):
    t = rng.integers(0, c, n)
    t[::3] = ignore
    w = (rng.random(c) + 0.5).astype(np.float32) if weighted else None
    return t, w


def _logp(rng, n, c, dtype=np.float32):
    x = 2.0 * rng.standard_normal((n, c))
    return (x - np.log(np.exp(x).sum(axis=1, keepdims=True))).astype(dtype)


def _out_shape(red, n):
    return (n,) if red == 0 else (1,)


def _nll(logp, t, w, red, ignore=IGNORE):
    n = 1 if logp.ndim == 1 else logp.shape[0]
    out = np.zeros(_out_shape(red, n), np.float32)
    got = launch(
        ls.nll_loss_forward,
        out,
        np.zeros(1, np.float32),
        logp,
        pairs(t),
        w,
        reduction=red,
        ignore_index=ignore,
    )
    return got[0], got[1]


@pytest.mark.parametrize(("n", "c"), SHAPES)
@pytest.mark.parametrize("red", REDS)
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_nll_forward(rng, n, c, red, weighted):
    t, w = _case(rng, n, c, weighted)
    logp = _logp(rng, n, c)
    out, tw = _nll(logp, t, w, red)
    want, want_tw = ls.nll_loss_ref(logp, t, w, reduction=red, ignore_index=IGNORE)
    assert_close(out, np.atleast_1d(want), "float32", 4, abs_frac=1)
    assert_close(tw, np.atleast_1d(want_tw), "float32", 2)


def test_nll_ignore_index_is_a_class(rng):
    """ignore_index may be a real class id: those rows count for nothing."""
    t, w = _case(rng, 50, 6, True, ignore=2)
    logp = _logp(rng, 50, 6)
    out, tw = _nll(logp, t, w, 1, ignore=2)
    want, want_tw = ls.nll_loss_ref(logp, t, w, reduction=1, ignore_index=2)
    assert_close(out, [want], "float32", 4)
    assert_close(tw, [want_tw], "float32", 2)


@pytest.mark.parametrize("red", REDS)
def test_nll_unbatched(rng, red):
    logp = _logp(rng, 1, 9)[0]
    w = (rng.random(9) + 0.5).astype(np.float32)
    out, tw = _nll(logp, [4], w, red)
    want, want_tw = ls.nll_loss_ref(logp, [4], w, reduction=red, ignore_index=IGNORE)
    assert_close(out, np.atleast_1d(want), "float32", 2)
    assert_close(tw, [want_tw], "float32", 2)  # computed for an unbatched input even for none


def test_nll_bf16_and_minus_inf(rng):
    """bf16 log-probabilities with -inf entries (masked classes) off the targets."""
    logp = _logp(rng, 40, 12, BF16)
    logp[:, 5] = -np.inf
    t, _ = _case(rng, 40, 12, False)
    t[t == 5] = 0
    out, _ = _nll(logp, t, None, 2)
    want, _ = ls.nll_loss_ref(logp, t, None, reduction=2, ignore_index=IGNORE)
    assert_close(out, [want], "float32", 4)


@pytest.mark.parametrize(("n", "c"), SHAPES)
@pytest.mark.parametrize("red", REDS)
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_nll_backward(rng, n, c, red, weighted):
    t, w = _case(rng, n, c, weighted)
    gout = randn(rng, _out_shape(red, n), np.float32)
    tw = np.array([7.5], np.float32)
    grad = np.full((n, c), np.nan, np.float32)  # every element must be written
    got = launch(
        ls.nll_loss_backward, grad, gout, pairs(t), w, tw, reduction=red, ignore_index=IGNORE
    )[0]
    want = ls.nll_loss_backward_ref(gout, t, w, tw, (n, c), reduction=red, ignore_index=IGNORE)
    assert_close(got, want, "float32", 2)


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_nll_in_chunks(rng, monkeypatch, weighted):
    monkeypatch.setattr(_loss_rows, "MAX_CHUNK_COLS", 64)
    t, w = _case(rng, 9, 300, weighted)
    logp = _logp(rng, 9, 300)
    out, _ = _nll(logp, t, w, 0)
    assert_close(
        out, ls.nll_loss_ref(logp, t, w, reduction=0, ignore_index=IGNORE)[0], "float32", 2
    )
    gout = randn(rng, (9,), np.float32)
    grad = np.zeros((9, 300), np.float32)
    got = launch(
        ls.nll_loss_backward, grad, gout, pairs(t), w, None, reduction=0, ignore_index=IGNORE
    )[0]
    want = ls.nll_loss_backward_ref(gout, t, w, None, (9, 300), reduction=0, ignore_index=IGNORE)
    assert_close(got, want, "float32", 2)


# ---------------------------------------------------------------- cross_entropy
def _ce(x, t, w, red, eps, xs=None):
    n = 1 if x.ndim == 1 else x.shape[0]
    loss = np.zeros(_out_shape(red, n), np.float32)
    lse, tw = np.zeros(n, np.float32), np.zeros(1, np.float32)
    got = launch(
        ls.cross_entropy_forward,
        loss,
        lse,
        tw,
        x if xs is None else xs,
        pairs(t),
        w,
        reduction=red,
        ignore_index=IGNORE,
        label_smoothing=eps,
    )
    return got[0], got[1], got[2]


def _ce_bwd(x, t, w, red, eps, lse, tw, rng):
    n = 1 if x.ndim == 1 else x.shape[0]
    g = randn(rng, _out_shape(red, n), np.float32)
    grad = np.full(x.shape, np.nan, np.float32)
    got = launch(
        ls.cross_entropy_backward,
        grad,
        g,
        x,
        pairs(t),
        lse,
        tw,
        w,
        reduction=red,
        ignore_index=IGNORE,
        label_smoothing=eps,
    )[0]
    want = ls.cross_entropy_backward_ref(
        g, x, t, w, reduction=red, ignore_index=IGNORE, label_smoothing=eps
    )
    return got, want.reshape(x.shape)


@pytest.mark.parametrize(("n", "c"), SHAPES)
@pytest.mark.parametrize("red", REDS)
@pytest.mark.parametrize(
    ("weighted", "eps"),
    [
        pytest.param(False, 0.0, id="plain"),
        pytest.param(True, 0.0, id="weighted"),
        pytest.param(False, 0.1, id="smoothing"),
        pytest.param(True, 0.2, id="weighted-smoothing"),
    ],
)
def test_cross_entropy(rng, n, c, red, weighted, eps):
    t, w = _case(rng, n, c, weighted)
    x = randn(rng, (n, c), np.float32, 2.0)
    loss, lse, tw = _ce(x, t, w, red, eps)
    want, want_lse, want_tw = ls.cross_entropy_ref(
        x, t, w, reduction=red, ignore_index=IGNORE, label_smoothing=eps
    )
    assert_close(loss, np.atleast_1d(want), "float32", 4, abs_frac=1)
    assert_close(lse, want_lse, "float32", 2)
    if red != 0:
        assert_close(tw, [want_tw], "float32", 2)
    got, want_g = _ce_bwd(x, t, w, red, eps, lse, tw, rng)
    assert_close(got, want_g, "float32", 4, abs_frac=1)


@pytest.mark.parametrize(
    ("weighted", "eps"),
    [
        pytest.param(False, 0.0, id="plain"),
        pytest.param(True, 0.1, id="weighted-smoothing"),
    ],
)
@pytest.mark.parametrize("red", REDS)
def test_cross_entropy_in_chunks(rng, monkeypatch, weighted, eps, red):
    """Many classes: chunks of 64 (lse merged across chunks, target picked in one chunk)."""
    monkeypatch.setattr(_loss_rows, "MAX_CHUNK_COLS", 64)
    t, w = _case(rng, 9, 300, weighted)
    x = randn(rng, (9, 300), np.float32, 3.0)
    x[4, 250] = 40.0
    loss, lse, tw = _ce(x, t, w, red, eps)
    want, want_lse, _ = ls.cross_entropy_ref(
        x, t, w, reduction=red, ignore_index=IGNORE, label_smoothing=eps
    )
    assert_close(loss, np.atleast_1d(want), "float32", 4, abs_frac=1)
    assert_close(lse, want_lse, "float32", 2)
    got, want_g = _ce_bwd(x, t, w, red, eps, lse, tw, rng)
    assert_close(got, want_g, "float32", 4, abs_frac=1)


def test_cross_entropy_bf16_strided_masked_logits(rng):
    """bf16 logits stored transposed, with -inf (masked) logits off the targets."""
    xv, xs = transposed(rng, (70, 16), BF16, (1, 0))
    xv[:, 3] = -np.inf  # xv is a view of xs's base: the kernel sees it too
    t, w = _case(rng, 70, 16, True)
    t[t == 3] = 1
    loss, lse, _ = _ce(xv, t, w, 1, 0.0, xs=xs)
    want, want_lse, _ = ls.cross_entropy_ref(xv, t, w, reduction=1, ignore_index=IGNORE)
    assert_close(loss, [want], "float32", 4)
    assert_close(lse, want_lse, "float32", 2)


def test_cross_entropy_unbatched(rng):
    x = randn(rng, (11,), np.float32, 2.0)
    loss, lse, tw = _ce(x, [6], None, 1, 0.1)
    want, _, _ = ls.cross_entropy_ref(
        x, [6], None, reduction=1, ignore_index=IGNORE, label_smoothing=0.1
    )
    assert_close(loss, [want], "float32", 2)
    got, want_g = _ce_bwd(x, [6], None, 1, 0.1, lse, tw, rng)
    assert_close(got, want_g, "float32", 4, abs_frac=1)


def test_mean_over_no_counted_rows_is_nan(rng):
    x = randn(rng, (4, 5), np.float32)
    loss, _, tw = _ce(x, [IGNORE] * 4, None, 1, 0.0)
    assert np.isnan(loss[0]) and tw[0] == 0.0  # 0 / 0, as torch


# ---------------------------------------------------------------- references and checks
@pytest.mark.parametrize("red", REDS)
def test_references_match_torch(rng, red):
    torch = pytest.importorskip("torch")
    n, c = 7, 5
    t, w = _case(rng, n, c, True)
    x = torch.tensor(rng.standard_normal((n, c)), requires_grad=True)
    wt, tt = torch.tensor(w, dtype=torch.float64), torch.tensor(t)
    name = ("none", "mean", "sum")[red]
    logp = torch.log_softmax(x, 1).detach()
    out, tw = torch.ops.aten.nll_loss_forward(logp, tt, wt, red, IGNORE)
    ref, ref_tw = ls.nll_loss_ref(logp.numpy(), t, w, reduction=red, ignore_index=IGNORE)
    np.testing.assert_allclose(ref, out.numpy(), rtol=1e-12)
    np.testing.assert_allclose(ref_tw, tw.numpy(), rtol=1e-6)
    g = torch.tensor(rng.standard_normal(out.shape))
    gl = torch.ops.aten.nll_loss_backward(g, logp, tt, wt, red, IGNORE, tw)
    ref_g = ls.nll_loss_backward_ref(
        g.numpy(), t, w, tw.numpy(), (n, c), reduction=red, ignore_index=IGNORE
    )
    np.testing.assert_allclose(ref_g, gl.numpy(), rtol=1e-12)
    ce = torch.nn.functional.cross_entropy(
        x, tt, wt, ignore_index=IGNORE, reduction=name, label_smoothing=0.15
    )
    ref_ce, _, _ = ls.cross_entropy_ref(
        x.detach().numpy(), t, w, reduction=red, ignore_index=IGNORE, label_smoothing=0.15
    )
    np.testing.assert_allclose(ref_ce, ce.detach().numpy(), rtol=1e-10)
    g = torch.tensor(rng.standard_normal(ce.shape))
    (gx,) = torch.autograd.grad(ce, x, g)
    ref_gx = ls.cross_entropy_backward_ref(
        g.numpy(),
        x.detach().numpy(),
        t,
        w,
        reduction=red,
        ignore_index=IGNORE,
        label_smoothing=0.15,
    )
    np.testing.assert_allclose(ref_gx, gx.numpy(), rtol=1e-9, atol=1e-12)


def test_target_error_host_check():
    assert ls.target_error(np.array([0, 4, IGNORE]), 5, IGNORE) is None
    msg = ls.target_error(np.array([0, 5, -1]), 5, IGNORE)
    assert msg is not None and msg.startswith("Target 5 is out of bounds")
    assert ls.target_error(np.array([-1]), 5, -1) is None


@pytest.mark.parametrize(
    ("kind", "match"),
    [
        pytest.param("target", "int64 pair view", id="target-not-pairs"),
        pytest.param("reduction", "reduction=3", id="reduction"),
        pytest.param("weight", r"weight must have shape \[D\]=\[5\]", id="weight-shape"),
        pytest.param("rows", "target must hold one value per row", id="target-rows"),
    ],
)
def test_nll_forward_rejects(kind, match):
    logp = np.zeros((4, 5), np.float32)
    target = pairs([0, 1, 2, 3])
    if kind == "target":
        target = np.zeros(4, np.int32)
    if kind == "rows":
        target = pairs([0, 1, 2])
    w = np.ones(4 if kind == "weight" else 5, np.float32)
    red = 3 if kind == "reduction" else 2
    assert_rejected_views(
        match,
        ls.nll_loss_forward,
        np.zeros(1, np.float32),
        None,
        logp,
        target,
        w,
        reduction=red,
        ignore_index=IGNORE,
    )


def test_backward_mean_needs_total_weight():
    assert_rejected_views(
        "needs total_weight",
        ls.nll_loss_backward,
        np.zeros((2, 3), np.float32),
        np.ones(1, np.float32),
        pairs([0, 1]),
        None,
        None,
        reduction=1,
        ignore_index=IGNORE,
    )


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_random_shapes(seed):
    rng = np.random.default_rng(1700 + seed)
    n, c = int(rng.integers(1, 1200)), int(rng.integers(2, 3000))
    red, eps = seed % 3, (0.0, 0.1)[seed % 2]
    t, w = _case(rng, n, c, bool(seed % 2))
    x = randn(rng, (n, c), np.float32, 2.0)
    loss, lse, tw = _ce(x, t, w, red, eps)
    want, _, _ = ls.cross_entropy_ref(
        x, t, w, reduction=red, ignore_index=IGNORE, label_smoothing=eps
    )
    assert_close(loss, np.atleast_1d(want), "float32", 8, abs_frac=1)
    got, want_g = _ce_bwd(x, t, w, red, eps, lse, tw, rng)
    assert_close(got, want_g, "float32", 4, abs_frac=1)


@pytest.mark.parametrize("chip", ["trn1", "trn2"])
def test_other_chips(rng, chip):
    t, w = _case(rng, 130, 20, True)
    x = randn(rng, (130, 20), np.float32, 2.0)
    loss, lse, tw = np.zeros(1, np.float32), np.zeros(130, np.float32), np.zeros(1, np.float32)
    got = launch(
        ls.cross_entropy_forward,
        loss,
        lse,
        tw,
        x,
        pairs(t),
        w,
        reduction=1,
        ignore_index=IGNORE,
        label_smoothing=0.1,
        chip=chip,
    )
    want = ls.cross_entropy_ref(x, t, w, reduction=1, ignore_index=IGNORE, label_smoothing=0.1)
    assert_close(got[0], [want[0]], "float32", 4)
    grad = launch(
        ls.nll_loss_backward,
        np.zeros_like(x),
        np.ones(1, np.float32),
        pairs(t),
        w,
        got[2],
        reduction=1,
        ignore_index=IGNORE,
        chip=chip,
    )[0]
    ref = ls.nll_loss_backward_ref(
        np.ones(1), t, w, got[2], (130, 20), reduction=1, ignore_index=IGNORE
    )
    assert_close(grad, ref, "float32", 2)


# ---------------------------------------------------------------- [N, C, *S] inputs
@pytest.mark.parametrize("red", REDS)
def test_nll_spatial(rng, red):
    """nll_loss2d-style input [N, C, H, W] with targets [N, H, W] (classes on dim 1)."""
    n, c, h, w_ = 2, 5, 3, 7
    x = 2.0 * rng.standard_normal((n, c, h, w_))
    logp = (x - np.log(np.exp(x).sum(axis=1, keepdims=True))).astype(np.float32)
    t = rng.integers(0, c, (n, h, w_))
    t[0, 1, ::2] = IGNORE
    w = (rng.random(c) + 0.5).astype(np.float32)
    out = np.zeros((n, h, w_) if red == 0 else (1,), np.float32)
    got = launch(
        ls.nll_loss_forward,
        out,
        np.zeros(1, np.float32),
        logp,
        pairs(t),
        w,
        reduction=red,
        ignore_index=IGNORE,
    )
    want, want_tw = ls.nll_loss_ref(logp, t, w, reduction=red, ignore_index=IGNORE)
    assert_close(got[0], np.reshape(want, got[0].shape), "float32", 4, abs_frac=1)
    gout = randn(rng, out.shape, np.float32)
    tw = np.array([want_tw], np.float32)
    grad = launch(
        ls.nll_loss_backward,
        np.zeros_like(logp),
        gout,
        pairs(t),
        w,
        tw,
        reduction=red,
        ignore_index=IGNORE,
    )[0]
    ref = ls.nll_loss_backward_ref(gout, t, w, tw, logp.shape, reduction=red, ignore_index=IGNORE)
    assert_close(grad, ref, "float32", 2)


@pytest.mark.parametrize("red", REDS)
def test_cross_entropy_spatial_channels_last(rng, red):
    """Segmentation-style logits [N, C, L] stored channels-last, label smoothing."""
    xv, xs = transposed(rng, (3, 6, 50), np.float32, (0, 2, 1))
    t = rng.integers(0, 6, (3, 50))
    t[1, :10] = IGNORE
    loss = np.zeros((3, 50) if red == 0 else (1,), np.float32)
    lse, tw = np.zeros((3, 50), np.float32), np.zeros(1, np.float32)
    got = launch(
        ls.cross_entropy_forward,
        loss,
        lse,
        tw,
        xs,
        pairs(t),
        None,
        reduction=red,
        ignore_index=IGNORE,
        label_smoothing=0.1,
    )
    want, want_lse, _ = ls.cross_entropy_ref(
        xv, t, None, reduction=red, ignore_index=IGNORE, label_smoothing=0.1
    )
    assert_close(got[0], np.reshape(want, got[0].shape), "float32", 4, abs_frac=1)
    assert_close(got[1], np.reshape(want_lse, (3, 50)), "float32", 2)
    g = randn(rng, loss.shape, np.float32)
    grad = launch(
        ls.cross_entropy_backward,
        np.zeros(xv.shape, np.float32),
        g,
        xs,
        pairs(t),
        got[1],
        got[2],
        None,
        reduction=red,
        ignore_index=IGNORE,
        label_smoothing=0.1,
    )[0]
    ref = ls.cross_entropy_backward_ref(
        g, xv, t, None, reduction=red, ignore_index=IGNORE, label_smoothing=0.1
    )
    assert_close(grad, ref, "float32", 4, abs_frac=1)


def test_spatial_references_match_torch(rng):
    torch = pytest.importorskip("torch")
    x = torch.tensor(rng.standard_normal((2, 4, 3, 5)), requires_grad=True)
    t = rng.integers(0, 4, (2, 3, 5))
    t[0, 0, 0] = IGNORE
    w = rng.random(4) + 0.5
    ce = torch.nn.functional.cross_entropy(
        x,
        torch.tensor(t),
        torch.tensor(w),
        ignore_index=IGNORE,
        reduction="none",
        label_smoothing=0.2,
    )
    want, _, _ = ls.cross_entropy_ref(
        x.detach().numpy(), t, w, reduction=0, ignore_index=IGNORE, label_smoothing=0.2
    )
    np.testing.assert_allclose(want, ce.detach().numpy(), rtol=1e-10)
    g = torch.tensor(rng.standard_normal(ce.shape))
    (gx,) = torch.autograd.grad(ce, x, g)
    ref = ls.cross_entropy_backward_ref(
        g.numpy(), x.detach().numpy(), t, w, reduction=0, ignore_index=IGNORE, label_smoothing=0.2
    )
    np.testing.assert_allclose(ref, gx.numpy(), rtol=1e-9, atol=1e-12)
