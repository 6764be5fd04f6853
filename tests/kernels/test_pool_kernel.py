"""trnsim.kernels.pool: max/avg/adaptive pooling and their backward over strided NCHW views,
against float64 references (torch for index ties and the backward)."""

from __future__ import annotations

import numpy as np
import pytest
from kernel_testing import BF16, assert_close, randn
from torch_testing import torch_or_skip
from trnsim.kernels import pool as pl
from views_testing import assert_rejected_views, launch, transposed


def _x(rng, shape, dtype, layout="nchw"):
    if layout == "nhwc" and len(shape) == 4:
        return transposed(rng, shape, dtype, (0, 2, 3, 1))
    x = randn(rng, shape, dtype)
    return x, x


def _int64(pairs: np.ndarray) -> np.ndarray:
    return pairs[..., 0].astype(np.int64) | (pairs[..., 1].astype(np.int64) << 32)


def _scatter_ref(go, idx, in_shape) -> np.ndarray:
    """grad_input of max pooling: grad_out added at the flat indices, plane by plane."""
    planes = int(np.prod(in_shape[:-2]))
    gin = np.zeros((planes, in_shape[-2] * in_shape[-1]))
    g, i = go.astype(np.float64).reshape(planes, -1), idx.reshape(planes, -1)
    for q in range(planes):
        np.add.at(gin[q], i[q], g[q])
    return gin.reshape(in_shape)


MAX_CASES = [
    # shape, kernel, stride, padding, dilation, ceil_mode
    pytest.param((1, 1, 1, 1), 1, 1, 0, 1, False, id="1x1"),
    pytest.param((2, 3, 9, 11), 3, 2, 1, 1, False, id="k3-s2-p1"),
    pytest.param((2, 3, 9, 11), 3, 2, 1, 1, True, id="ceil"),
    pytest.param((1, 130, 10, 12), 2, 2, 0, 1, True, id="c130"),
    pytest.param((2, 3, 13, 13), 3, 1, 1, 2, False, id="dilation2"),
    pytest.param((3, 20, 20), 3, 3, 0, 1, True, id="3d-input"),
    pytest.param((1, 2, 100, 100), 3, 2, 1, 1, False, id="bands"),
    pytest.param((1, 2, 9, 9), 2, 3, 0, 1, False, id="stride>kernel"),
    pytest.param((2, 2, 7, 9), (3, 2), (2, 1), (1, 0), 1, True, id="rect"),
]


@pytest.mark.parametrize(("shape", "k", "s", "p", "d", "ceil"), MAX_CASES)
def test_max_pool2d_and_backward(rng, shape, k, s, p, d, ceil):
    x, x_arg = _x(rng, shape, np.float32, "nhwc")
    ref, ref_idx = pl.max_pool2d_ref(x, k, s, p, d, ceil)
    kw = {"kernel_size": k, "stride": s, "padding": p, "dilation": d, "ceil_mode": ceil}
    out, idx = launch(lambda o, i, a: pl.max_pool2d(o, i, a, **kw), np.zeros(ref.shape,
                      np.float32), np.zeros((*ref.shape, 2), np.int32), x_arg)[:2]
    np.testing.assert_array_equal(out, ref.astype(np.float32))
    np.testing.assert_array_equal(_int64(idx), ref_idx)
    go = randn(rng, ref.shape, np.float32)
    gin = launch(lambda g, o, i: pl.max_pool2d_backward(g, o, i, **kw),
                 np.zeros(shape, np.float32), go, idx)[0]
    assert_close(gin, _scatter_ref(go, ref_idx, shape), "float32", abs_frac=1)


def test_max_pool2d_without_indices_bf16(rng):
    x = randn(rng, (2, 4, 15, 17), BF16)
    ref, _ = pl.max_pool2d_ref(x, 3, None, 1)  # stride [] = kernel_size, as aten
    out = launch(lambda o, a: pl.max_pool2d(o, None, a, kernel_size=3, stride=[], padding=1,
                                            dilation=1, ceil_mode=False),
                 np.zeros(ref.shape, BF16), x)[0]
    np.testing.assert_array_equal(out.astype(np.float64), ref)


def test_max_pool2d_ties_match_torch(rng):
    """Integer-valued inputs (many ties): the index of the first maximum, as torch."""
    torch = torch_or_skip()
    x = rng.integers(0, 3, (2, 3, 11, 10)).astype(np.float32)
    kw = {"kernel_size": 3, "stride": 2, "padding": 1, "dilation": 1, "ceil_mode": True}
    t_out, t_idx = torch.nn.functional.max_pool2d(torch.tensor(x), return_indices=True, **kw)
    out, idx = launch(lambda o, i, a: pl.max_pool2d(o, i, a, **kw), np.zeros(t_out.shape,
                      np.float32), np.zeros((*t_out.shape, 2), np.int32), x)[:2]
    np.testing.assert_array_equal(out, t_out.numpy())
    np.testing.assert_array_equal(_int64(idx), t_idx.numpy())


AVG_CASES = [
    # shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override
    pytest.param((2, 3, 9, 11), 3, 2, 1, True, True, None, id="ceil-include-pad"),
    pytest.param((2, 3, 9, 11), 3, 2, 1, True, False, None, id="ceil-exclude-pad"),
    pytest.param((1, 3, 40, 110), 3, 1, 1, False, False, None, id="bands"),
    pytest.param((2, 3, 9, 11), (3, 2), (2, 1), (1, 1), False, True, 5, id="divisor"),
    pytest.param((130, 5, 6), 2, None, 0, False, True, None, id="3d-c130"),
]


@pytest.mark.parametrize(("shape", "k", "s", "p", "ceil", "cip", "dov"), AVG_CASES)
def test_avg_pool2d_and_backward_match_torch(rng, shape, k, s, p, ceil, cip, dov):
    torch = torch_or_skip()
    x, x_arg = _x(rng, shape, np.float32, "nhwc")
    tx = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    ty = torch.nn.functional.avg_pool2d(tx, k, s, p, ceil, cip, dov)
    np.testing.assert_allclose(pl.avg_pool2d_ref(x, k, s, p, ceil, cip, dov), ty.detach(),
                               rtol=1e-12)
    kw = {"kernel_size": k, "stride": s, "padding": p, "ceil_mode": ceil,
          "count_include_pad": cip, "divisor_override": dov}
    out = launch(lambda o, a: pl.avg_pool2d(o, a, **kw), np.zeros(ty.shape, np.float32),
                 x_arg)[0]
    assert_close(out, ty.detach().numpy(), "float32", abs_frac=1)
    go = randn(rng, tuple(ty.shape), np.float32)
    ty.backward(torch.tensor(go, dtype=torch.float64))
    gin = launch(lambda g, o: pl.avg_pool2d_backward(g, o, **kw), np.zeros(shape, np.float32),
                 go)[0]
    assert_close(gin, tx.grad.numpy(), "float32", abs_frac=1)


def test_avg_pool2d_bf16_on_trn1(rng):
    x = randn(rng, (2, 8, 12, 12), BF16)
    ref = pl.avg_pool2d_ref(x, 2)
    out = launch(lambda o, a: pl.avg_pool2d(o, a, kernel_size=2, stride=2, padding=0,
                                            ceil_mode=False), np.zeros(ref.shape, BF16), x,
                 chip="trn1")[0]
    assert_close(out, ref, "bfloat16")


def test_adaptive_avg_pool2d_1x1_is_the_plane_mean(rng):
    x, x_arg = _x(rng, (2, 5, 70, 90), np.float32, "nhwc")
    out = launch(pl.adaptive_avg_pool2d, np.zeros((2, 5, 1, 1), np.float32), x_arg)[0]
    assert_close(out, x.astype(np.float64).mean(axis=(2, 3), keepdims=True), "float32")
    go = randn(rng, (2, 5, 1, 1), np.float32)
    gin = launch(pl.adaptive_avg_pool2d_backward, np.zeros(x.shape, np.float32), go)[0]
    assert_close(gin, np.broadcast_to(go.astype(np.float64) / 6300, x.shape), "float32")


@pytest.mark.parametrize(
    ("kernel", "attrs", "args", "match"),
    [
        pytest.param("max", {"padding": 2}, ((1, 1, 4, 4), (1, 1, 4, 4)), "half of the",
                     id="padding"),
        pytest.param("max", {}, ((1, 1, 3, 3), (1, 1, 4, 4)), "expected", id="out-shape"),
        pytest.param("avg", {"divisor_override": 0}, ((1, 1, 3, 3), (1, 1, 7, 7)),
                     "divisor_override", id="divisor"),
        pytest.param("adaptive", {}, ((1, 1, 2, 2), (1, 1, 4, 4)), "only a 1x1", id="adapt"),
    ],
)
def test_pool_rejects_bad_arguments(kernel, attrs, args, match):
    out, x = (np.zeros(s, np.float32) for s in args)
    if kernel == "max":
        kw = {"kernel_size": 3, "stride": 1, "padding": 0, "dilation": 1, "ceil_mode": False,
              **attrs}
        assert_rejected_views(match, pl.max_pool2d, out, None, x, **kw)
    elif kernel == "avg":
        kw = {"kernel_size": 3, "stride": 2, "padding": 0, "ceil_mode": False, **attrs}
        assert_rejected_views(match, pl.avg_pool2d, out, x, **kw)
    else:
        assert_rejected_views(match, pl.adaptive_avg_pool2d, out, x)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_pools_random(seed):
    rng = np.random.default_rng(900 + seed)
    k, s, d = int(rng.integers(1, 5)), int(rng.integers(1, 4)), int(rng.integers(1, 3))
    p = int(rng.integers(0, (d * (k - 1) + 1) // 2 + 1))
    shape = (int(rng.integers(1, 3)), int(rng.integers(1, 150)),
             *(int(v) for v in rng.integers(d * (k - 1) + 1, 60, 2)))
    ceil = bool(seed % 2)
    dtype = (np.float32, BF16)[seed % 2]
    x, x_arg = _x(rng, shape, dtype, ("nchw", "nhwc")[seed % 2])
    ref, ref_idx = pl.max_pool2d_ref(x, k, s, p, d, ceil)
    kw = {"kernel_size": k, "stride": s, "padding": p, "dilation": d, "ceil_mode": ceil}
    out, idx = launch(lambda o, i, a: pl.max_pool2d(o, i, a, **kw), np.zeros(ref.shape, dtype),
                      np.zeros((*ref.shape, 2), np.int32), x_arg)[:2]
    np.testing.assert_array_equal(out.astype(np.float64), ref)
    np.testing.assert_array_equal(_int64(idx), ref_idx)
    go = randn(rng, ref.shape, dtype)
    gin = launch(lambda g, o, i: pl.max_pool2d_backward(g, o, i, **kw), np.zeros(shape, dtype),
                 go, idx)[0]
    assert_close(gin, _scatter_ref(go, ref_idx, shape), np.dtype(dtype).name, abs_frac=1)
    if d == 1:
        aref = pl.avg_pool2d_ref(x, k, s, p, ceil, bool(seed % 3))
        akw = {"kernel_size": k, "stride": s, "padding": p, "ceil_mode": ceil,
               "count_include_pad": bool(seed % 3)}
        aout = launch(lambda o, a: pl.avg_pool2d(o, a, **akw), np.zeros(aref.shape, dtype),
                      x_arg)[0]
        assert_close(aout, aref, np.dtype(dtype).name, abs_frac=1)
