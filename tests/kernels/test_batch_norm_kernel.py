"""trnsim.kernels.batch_norm: batch norm forward (training, eval) and backward on strided
[N, C, *S] views against float64 references."""

from __future__ import annotations

import numpy as np
import pytest
from kernel_testing import BF16, assert_close, randn
from trnsim.kernels import _channels
from trnsim.kernels import batch_norm as bn
from views_testing import assert_rejected_views, launch, transposed

SHAPES = [
    pytest.param((4, 3), id="NC"),
    pytest.param((2, 5, 7), id="NCL"),
    pytest.param((3, 130, 4, 5), id="NCHW-130ch"),  # two channel tiles, the second ragged
    pytest.param((1, 2, 3, 1), id="tiny"),
]


def _params(rng, c, affine=True, running=True):
    w = rng.standard_normal(c).astype(np.float32) if affine else None
    b = rng.standard_normal(c).astype(np.float32) if affine else None
    rm = rng.standard_normal(c).astype(np.float32) if running else None
    rv = (rng.random(c) + 0.5).astype(np.float32) if running else None
    return w, b, rm, rv


def _forward(x, w, b, rm, rv, training, out_dtype=np.float32, save=True, xs=None):
    c = x.shape[1]
    out = np.zeros(x.shape, out_dtype)
    sm = np.zeros(c, np.float32) if save else None
    si = np.zeros(c, np.float32) if save else None
    got = launch(
        bn.batch_norm_forward,
        out,
        sm,
        si,
        x if xs is None else xs,
        w,
        b,
        None if rm is None else rm.copy(),
        None if rv is None else rv.copy(),
        training=training,
        momentum=0.1,
        eps=1e-5,
    )
    return got[0], got[1], got[2], got[6], got[7]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(
    ("affine", "running"),
    [
        pytest.param(True, True, id="affine-running"),
        pytest.param(False, False, id="plain"),
    ],
)
def test_forward_training(rng, shape, affine, running):
    x = (randn(rng, shape, np.float32, 2.0) + 0.5).astype(np.float32)
    w, b, rm, rv = _params(rng, shape[1], affine, running)
    got = _forward(x, w, b, rm, rv, training=True)
    want = bn.batch_norm_ref(x, w, b, rm, rv, training=True)
    for a, e in zip(got, want, strict=True):
        if e is None:
            assert a is None
        else:
            assert_close(a, e, "float32", 4)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("save", [True, False], ids=["save-stats", "no-save-stats"])
def test_forward_eval(rng, shape, save):
    x = randn(rng, shape, np.float32, 2.0)
    w, b, rm, rv = _params(rng, shape[1])
    got = _forward(x, w, b, rm, rv, training=False, save=save)
    want = bn.batch_norm_ref(x, w, b, rm, rv, training=False)
    assert_close(got[0], want[0], "float32", 4)
    if save:  # as on CUDA: the running mean and 1/sqrt(running_var + eps)
        assert_close(got[1], want[1], "float32", 1)
        assert_close(got[2], want[2], "float32", 2)
    np.testing.assert_array_equal(got[3], rm)  # eval leaves the running stats alone
    np.testing.assert_array_equal(got[4], rv)


def test_forward_bf16_channels_last(rng):
    """A bf16 NCHW tensor stored NHWC (channels_last), bf16 output."""
    xv, xs = transposed(rng, (3, 20, 6, 7), BF16, (0, 2, 3, 1))
    w, b, rm, rv = _params(rng, 20)
    got = _forward(xv, w, b, rm, rv, training=True, out_dtype=BF16, xs=xs)
    want = bn.batch_norm_ref(xv, w, b, rm, rv, training=True)
    assert got[0].dtype == np.dtype(BF16)
    assert_close(got[0], want[0], "bfloat16", 2)
    assert_close(got[1], want[1], "float32", 2)
    assert_close(got[4], want[4], "float32", 2)


@pytest.mark.parametrize("training", [True, False], ids=["training", "eval"])
def test_forward_in_chunks(rng, monkeypatch, training):
    """N * H * W beyond one chunk (100 elements here; chunks cross the N boundary)."""
    monkeypatch.setattr(_channels, "MAX_CHUNK", 100)
    x = (randn(rng, (4, 3, 13, 11), np.float32) * 3 + 1).astype(np.float32)
    w, b, rm, rv = _params(rng, 3)
    got = _forward(x, w, b, rm, rv, training=training)
    want = bn.batch_norm_ref(x, w, b, rm, rv, training=training)
    for a, e in zip(got, want, strict=True):
        assert_close(a, e, "float32", 4)


# ---------------------------------------------------------------- backward
def _backward(rng, shape, training, affine=True, outputs=(True, True, True), dtype=np.float32):
    x = (randn(rng, shape, np.float32, 2.0) + 0.5).astype(dtype)
    g = randn(rng, shape, dtype)
    w, b, rm, rv = _params(rng, shape[1], affine)
    _, mean, invstd, _, _ = bn.batch_norm_ref(x, w, b, rm, rv, training=training)
    c = shape[1]
    gx = np.zeros(shape, dtype) if outputs[0] else None
    gw = np.zeros(c, np.float32) if outputs[1] else None
    gb = np.zeros(c, np.float32) if outputs[2] else None
    if training:
        args = (mean.astype(np.float32), invstd.astype(np.float32), None, None)
    else:
        args = (None, None, rm, rv)
    got = launch(bn.batch_norm_backward, gx, gw, gb, g, x, w, *args, training=training, eps=1e-5)[
        :3
    ]
    return got, bn.batch_norm_backward_ref(g, x, w, mean, invstd, training=training)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("training", [True, False], ids=["training", "eval"])
def test_backward(rng, shape, training):
    got, want = _backward(rng, shape, training)
    for a, e in zip(got, want, strict=True):
        assert_close(a, e, "float32", 4, abs_frac=1)


@pytest.mark.parametrize(
    ("training", "outputs", "affine"),
    [
        pytest.param(True, (True, False, False), True, id="training-grad-x-only"),
        pytest.param(True, (False, True, True), True, id="training-no-grad-x"),
        pytest.param(False, (True, False, False), False, id="eval-grad-x-no-weight"),
        pytest.param(True, (True, True, True), False, id="training-no-weight"),
    ],
)
def test_backward_some_outputs(rng, training, outputs, affine):
    got, want = _backward(rng, (3, 6, 5), training, affine, outputs)
    for on, a, e in zip(outputs, got, want, strict=True):
        if on:
            assert_close(a, e, "float32", 4, abs_frac=1)
        else:
            assert a is None


def test_backward_bf16(rng):
    got, want = _backward(rng, (4, 10, 6), True, dtype=BF16)
    assert got[0].dtype == np.dtype(BF16)
    assert_close(got[0], want[0], "bfloat16", 2, abs_frac=1)
    assert_close(got[1], want[1], "float32", 4, abs_frac=1)


@pytest.mark.parametrize("training", [True, False], ids=["training", "eval"])
def test_backward_in_chunks(rng, monkeypatch, training):
    monkeypatch.setattr(_channels, "MAX_CHUNK", 100)
    got, want = _backward(rng, (4, 3, 13, 11), training)
    for a, e in zip(got, want, strict=True):
        assert_close(a, e, "float32", 4, abs_frac=1)


@pytest.mark.parametrize("training", [True, False], ids=["training", "eval"])
def test_references_match_torch(rng, training):
    torch = pytest.importorskip("torch")
    x = torch.tensor(rng.standard_normal((4, 3, 5)), requires_grad=True)
    w = torch.tensor(rng.standard_normal(3), requires_grad=True)
    b = torch.tensor(rng.standard_normal(3), requires_grad=True)
    rm, rv = torch.tensor(rng.standard_normal(3)), torch.tensor(rng.random(3) + 0.5)
    rm0, rv0 = rm.numpy().copy(), rv.numpy().copy()
    y = torch.nn.functional.batch_norm(x, rm, rv, w, b, training=training, momentum=0.1)
    want = bn.batch_norm_ref(
        x.detach().numpy(), w.detach().numpy(), b.detach().numpy(), rm0, rv0, training=training
    )
    np.testing.assert_allclose(want[0], y.detach().numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(want[3], rm.numpy(), rtol=1e-10)
    np.testing.assert_allclose(want[4], rv.numpy(), rtol=1e-10)
    g = torch.tensor(rng.standard_normal((4, 3, 5)))
    grads = torch.autograd.grad(y, (x, w, b), g)
    ref = bn.batch_norm_backward_ref(
        g.numpy(), x.detach().numpy(), w.detach().numpy(), want[1], want[2], training=training
    )
    for a, e in zip(ref, grads, strict=True):
        np.testing.assert_allclose(a, e.numpy(), rtol=1e-9, atol=1e-10)


def test_rejects_rank_1():
    x = np.zeros(5, np.float32)
    assert_rejected_views(
        "at least 2-D",
        bn.batch_norm_forward,
        x,
        None,
        None,
        x,
        None,
        None,
        None,
        None,
        training=True,
        momentum=0.1,
        eps=1e-5,
    )


def test_rejects_bad_weight_shape():
    x, w = np.zeros((2, 4), np.float32), np.zeros(3, np.float32)
    assert_rejected_views(
        r"weight must have shape \[C\]=\[4\]",
        bn.batch_norm_forward,
        x,
        None,
        None,
        x,
        w,
        None,
        None,
        None,
        training=True,
        momentum=0.1,
        eps=1e-5,
    )


def test_rejects_eval_without_running_stats():
    x = np.zeros((2, 4), np.float32)
    assert_rejected_views(
        "needs running_mean and running_var",
        bn.batch_norm_forward,
        x,
        None,
        None,
        x,
        None,
        None,
        None,
        None,
        training=False,
        momentum=0.1,
        eps=1e-5,
    )


def test_backward_rejects_missing_saved_stats():
    x = np.zeros((2, 4), np.float32)
    assert_rejected_views(
        "training mode needs save_mean and save_invstd",
        bn.batch_norm_backward,
        x,
        None,
        None,
        x,
        x,
        None,
        None,
        None,
        training=True,
        eps=1e-5,
    )


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_random_shapes(seed):
    rng = np.random.default_rng(1300 + seed)
    shape = (
        int(rng.integers(1, 6)),
        int(rng.integers(1, 300)),
        int(rng.integers(1, 30)),
        int(rng.integers(1, 30)),
    )
    training = bool(seed % 2)
    x = randn(rng, shape, np.float32, 2.0)
    w, b, rm, rv = _params(rng, shape[1])
    got = _forward(x, w, b, rm, rv, training=training)
    want = bn.batch_norm_ref(x, w, b, rm, rv, training=training)
    assert_close(got[0], want[0], "float32", 4)
    got, want = _backward(rng, shape, training)
    for a, e in zip(got, want, strict=True):
        assert_close(a, e, "float32", 8, abs_frac=1)


@pytest.mark.parametrize("chip", ["trn1", "trn2"])
def test_other_chips(rng, chip):
    x = randn(rng, (4, 5, 6), np.float32, 2.0)
    w, b, rm, rv = _params(rng, 5)
    sm, si = np.zeros(5, np.float32), np.zeros(5, np.float32)
    got = launch(
        bn.batch_norm_forward,
        np.zeros_like(x),
        sm,
        si,
        x,
        w,
        b,
        rm.copy(),
        rv.copy(),
        training=True,
        momentum=0.1,
        eps=1e-5,
        chip=chip,
    )
    want = bn.batch_norm_ref(x, w, b, rm, rv, training=True)
    assert_close(got[0], want[0], "float32", 4)
    g = randn(rng, (4, 5, 6), np.float32)
    grads = launch(
        bn.batch_norm_backward,
        np.zeros_like(x),
        np.zeros(5, np.float32),
        None,
        g,
        x,
        w,
        got[1],
        got[2],
        training=True,
        eps=1e-5,
        chip=chip,
    )
    ref = bn.batch_norm_backward_ref(g, x, w, want[1], want[2], training=True)
    assert_close(grads[0], ref[0], "float32", 4, abs_frac=1)
