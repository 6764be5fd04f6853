"""trnsim.kernels.conv: conv2d and conv2d_backward over strided NCHW views, against float64
references (and torch.autograd for one case)."""

from __future__ import annotations

import numpy as np
import pytest
from kernel_testing import BF16, assert_close, randn
from torch_testing import torch_or_skip
from trnsim.kernels import conv as cv
from views_testing import assert_rejected_views, launch, transposed


def _case(rng, n, cin, hw, cout, k, groups, dtype, layout="nchw"):
    """x (NCHW values) and its argument: 'nhwc' stores x channels-last and passes the NCHW
    permuted view (torch's channels_last memory format)."""
    shape = (n, cin, *hw)
    if layout == "nhwc":
        x, x_arg = transposed(rng, shape, dtype, (0, 2, 3, 1))
    else:
        x = x_arg = randn(rng, shape, dtype)
    w = randn(rng, (cout, cin // groups, k, k), dtype)
    return x, x_arg, w


CASES = [
    # (n, cin, (h, w), cout, k, stride, padding, dilation, groups)
    pytest.param(1, 1, (1, 1), 1, 1, 1, 0, 1, 1, id="1x1"),
    pytest.param(2, 3, (11, 13), 5, 3, 2, 1, 2, 1, id="s2-p1-d2"),
    pytest.param(2, 3, (12, 12), 5, 3, 2, 0, 1, 1, id="s2-p0-uncovered-rows"),
    pytest.param(1, 130, (10, 10), 140, 3, 1, 1, 1, 1, id="c130-ragged-channels"),
    pytest.param(2, 8, (9, 9), 8, 3, 1, 1, 1, 8, id="depthwise"),
    pytest.param(2, 8, (9, 9), 16, 3, 1, 1, 1, 8, id="depthwise-x2"),
    pytest.param(2, 8, (9, 9), 12, 3, 1, 1, 1, 4, id="groups4"),
    pytest.param(1, 4, (3, 600), 8, 3, 1, 1, 1, 1, id="wide-600"),
    pytest.param(1, 4, (30, 40), 6, 5, 3, 2, 1, 1, id="k5-s3"),
]


@pytest.mark.parametrize(("n", "cin", "hw", "cout", "k", "s", "p", "d", "g"), CASES)
def test_conv2d_forward(rng, n, cin, hw, cout, k, s, p, d, g):
    x, x_arg, w = _case(rng, n, cin, hw, cout, k, g, np.float32, "nhwc")
    b = randn(rng, (cout,), np.float32)
    ref = cv.conv2d_ref(x, w, b, s, p, d, g)
    kw = {"stride": s, "padding": [p, p], "dilation": d, "groups": g}
    got = launch(lambda o, a, ww, bb: cv.conv2d(o, a, ww, bb, **kw),
                 np.zeros(ref.shape, np.float32), x_arg, w, b)[0]
    assert_close(got, ref, "float32", abs_frac=1)


@pytest.mark.parametrize(("n", "cin", "hw", "cout", "k", "s", "p", "d", "g"), CASES)
def test_conv2d_backward(rng, n, cin, hw, cout, k, s, p, d, g):
    x, x_arg, w = _case(rng, n, cin, hw, cout, k, g, np.float32)
    go = randn(rng, cv.conv2d_ref(x, w, None, s, p, d, g).shape, np.float32)
    want = cv.conv2d_backward_ref(go, x, w, s, p, d, g)
    kw = {"stride": s, "padding": p, "dilation": d, "groups": g}
    got = launch(lambda a, b_, c, e, f, h: cv.conv2d_backward(a, b_, c, e, f, h, **kw),
                 np.zeros(x.shape, np.float32), np.zeros(w.shape, np.float32),
                 np.zeros((cout,), np.float32), go, x_arg, w)
    for g_, r in zip(got[:3], want, strict=True):
        assert_close(g_, r, "float32", abs_frac=1)


@pytest.mark.parametrize(("dtype", "chip"), [(BF16, "trn3"), (np.float16, "trn2"),
                                             (BF16, "trn1")])
def test_conv2d_16bit_and_older_chips(rng, dtype, chip):
    x, x_arg, w = _case(rng, 2, 16, (12, 12), 32, 3, 1, dtype)
    b = randn(rng, (32,), dtype)
    ref = cv.conv2d_ref(x, w, b, 1, 1, 1, 1)
    got = launch(lambda o, a, ww, bb: cv.conv2d(o, a, ww, bb, stride=1, padding=1, dilation=1,
                                                groups=1),
                 np.zeros(ref.shape, dtype), x_arg, w, b, chip=chip)[0]
    assert_close(got, ref, np.dtype(dtype).name, abs_frac=1)


def test_conv2d_backward_some_grads_none_bf16(rng):
    """Only grad_weight (bf16): the other outputs are None and never touched."""
    x, x_arg, w = _case(rng, 2, 16, (10, 10), 24, 1, 1, BF16, "nhwc")
    go = randn(rng, (2, 24, 10, 10), BF16)
    got = launch(lambda a, b_, c, e, f, h: cv.conv2d_backward(
        a, b_, c, e, f, h, stride=1, padding=0, dilation=1, groups=1),
        None, np.zeros(w.shape, BF16), None, go, x_arg, w)
    assert got[0] is None and got[2] is None
    assert_close(got[1], cv.conv2d_backward_ref(go, x, w)[1], "bfloat16", 2, abs_frac=1)


def test_conv2d_matches_torch_autograd(rng):
    torch = torch_or_skip()
    x, _, w = _case(rng, 2, 6, (9, 11), 4, 3, 2, np.float32)
    b = randn(rng, (4,), np.float32)
    kw = {"stride": (2, 1), "padding": (1, 2), "dilation": (1, 2), "groups": 2}
    tx, tw, tb = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (x, w, b))
    ty = torch.nn.functional.conv2d(tx, tw, tb, **kw)
    go = randn(rng, tuple(ty.shape), np.float32)
    ty.backward(torch.tensor(go, dtype=torch.float64))
    out = launch(lambda o, a, ww, bb: cv.conv2d(o, a, ww, bb, **kw),
                 np.zeros(ty.shape, np.float32), x, w, b)[0]
    assert_close(out, ty.detach().numpy(), "float32", abs_frac=1)
    got = launch(lambda a, b_, c, e, f, h: cv.conv2d_backward(a, b_, c, e, f, h, **kw),
                 np.zeros_like(x), np.zeros_like(w), np.zeros_like(b), go, x, w)
    for g_, t in zip(got[:3], (tx, tw, tb), strict=True):
        assert_close(g_, t.grad.numpy(), "float32", abs_frac=1)


@pytest.mark.parametrize(
    ("x_s", "w_s", "o_s", "kw", "match"),
    [
        pytest.param((1, 4, 8, 8), (4, 3, 3, 3), (1, 4, 6, 6), {}, "w.shape\\[1\\]", id="cin"),
        pytest.param((1, 4, 8, 8), (4, 4, 3, 3), (1, 4, 7, 7), {}, "expected", id="out"),
        pytest.param((1, 4, 2, 2), (4, 4, 3, 3), (1, 4, 1, 1), {}, "does not fit", id="fit"),
        pytest.param((1, 4, 8, 8), (4, 4, 3, 3), (1, 4, 6, 6), {"stride": 0}, ">= 1",
                     id="stride"),
        pytest.param((4, 8, 8), (4, 4, 3, 3), (1, 4, 6, 6), {}, "4-D", id="rank"),
    ],
)
def test_conv2d_rejects_bad_operands(x_s, w_s, o_s, kw, match):
    attrs = {"stride": 1, "padding": 0, "dilation": 1, "groups": 1, **kw}
    z = np.zeros
    assert_rejected_views(match, cv.conv2d, z(o_s, np.float32), z(x_s, np.float32),
                          z(w_s, np.float32), None, **attrs)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_conv2d_random(seed):
    rng = np.random.default_rng(700 + seed)
    g = int(rng.choice([1, 1, 2, 4]))
    cin, cout = g * int(rng.integers(1, 40)), g * int(rng.integers(1, 40))
    k, s, d = int(rng.integers(1, 4)), int(rng.integers(1, 3)), int(rng.integers(1, 3))
    p = int(rng.integers(0, k))
    hw = tuple(int(v) for v in rng.integers(d * (k - 1) + 1, 40, 2))
    dtype = (np.float32, BF16)[seed % 2]
    x, x_arg, w = _case(rng, int(rng.integers(1, 4)), cin, hw, cout, k, g, dtype,
                        ("nchw", "nhwc")[seed % 2])
    b = randn(rng, (cout,), dtype)
    ref = cv.conv2d_ref(x, w, b, s, p, d, g)
    kw = {"stride": s, "padding": p, "dilation": d, "groups": g}
    got = launch(lambda o, a, ww, bb: cv.conv2d(o, a, ww, bb, **kw), np.zeros(ref.shape, dtype),
                 x_arg, w, b)[0]
    assert_close(got, ref, np.dtype(dtype).name, abs_frac=1)
    go = randn(rng, ref.shape, dtype)
    want = cv.conv2d_backward_ref(go, x, w, s, p, d, g)
    got = launch(lambda a, b_, c, e, f, h: cv.conv2d_backward(a, b_, c, e, f, h, **kw),
                 np.zeros(x.shape, dtype), np.zeros(w.shape, dtype), np.zeros((cout,), dtype),
                 go, x_arg, w)
    for g_, r in zip(got[:3], want, strict=True):
        assert_close(g_, r, np.dtype(dtype).name, 2, abs_frac=1)


@pytest.mark.parametrize(
    ("n", "cin", "hw", "cout", "k", "s", "p", "op", "d", "g"),
    [
        pytest.param(2, 4, (5, 6), 6, 3, 2, 1, 1, 1, 1, id="s2-op1"),
        pytest.param(1, 8, (4, 4), 8, 3, 1, 1, 0, 2, 8, id="depthwise-d2"),
        pytest.param(2, 6, (3, 5), 4, 4, 3, 0, 2, 1, 2, id="groups-k4-s3"),
    ],
)
def test_conv_transpose2d_forward_and_backward(rng, n, cin, hw, cout, k, s, p, op, d, g):
    """ConvTranspose2d is conv2d's input gradient: forward against conv2d_backward_ref, the
    backward against conv2d (input gradient) and conv2d's weight gradient with x and grad_out
    exchanged."""
    x, x_arg = transposed(rng, (n, cin, *hw), np.float32, (0, 2, 3, 1))
    w = randn(rng, (cin, cout // g, k, k), np.float32)
    b = randn(rng, (cout,), np.float32)
    oh, ow = ((v - 1) * s - 2 * p + d * (k - 1) + op + 1 for v in hw)
    kw = {"stride": s, "padding": p, "output_padding": op, "dilation": d, "groups": g}
    ref = cv.conv2d_backward_ref(x, np.zeros((n, cout, oh, ow)), w, s, p, d, g)[0]
    ref = ref + b[None, :, None, None]
    out = launch(lambda o, a, ww, bb: cv.conv_transpose2d(o, a, ww, bb, **kw),
                 np.zeros((n, cout, oh, ow), np.float32), x_arg, w, b)[0]
    assert_close(out, ref, "float32", abs_frac=1)
    go = randn(rng, (n, cout, oh, ow), np.float32)
    got = launch(lambda a, b_, c, e, f, h: cv.conv_transpose2d_backward(a, b_, c, e, f, h, **kw),
                 np.zeros(x.shape, np.float32), np.zeros(w.shape, np.float32),
                 np.zeros((cout,), np.float32), go, x_arg, w)
    assert_close(got[0], cv.conv2d_ref(go, w, None, s, p, d, g), "float32", abs_frac=1)
    assert_close(got[1], cv.conv2d_backward_ref(x, go, w, s, p, d, g)[1], "float32", abs_frac=1)
    assert_close(got[2], go.astype(np.float64).sum(axis=(0, 2, 3)), "float32", abs_frac=1)
