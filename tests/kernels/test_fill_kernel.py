"""trnsim.kernels.fill: fill, arange and tril/triu against their references and PyTorch, over
strided outputs, dtypes (int64 pair views included), in-place use and rejections."""

from __future__ import annotations

import nki
import numpy as np
import pytest
import torch
from kernel_testing import BF16, Strided, assert_close, assert_rejected, program_of, run_views
from trnsim.kernels import fill as fl

pytestmark = pytest.mark.filterwarnings("error::trnsim.errors.SimulationWarning")


def pairs(a):
    a = np.ascontiguousarray(a, np.int64)
    return a.view(np.int32).reshape((*a.shape, 2))


def unpairs(p):
    return np.ascontiguousarray(p).view(np.int64).reshape(p.shape[:-1])


@pytest.mark.parametrize(
    ("shape", "dtype", "value"),
    [
        ((4, 4), np.float32, 1.5),
        ((129,), BF16, -2.0),
        ((3, 5, 7), np.int32, 7),
        ((1000,), np.float16, 0.0),
        ((6, 2), np.int8, -3.9),  # truncated like PyTorch's fill_
        ((5,), np.bool_, 2),
    ],
)
def test_fill_matches_reference(shape, dtype, value):
    out = np.full(shape, 9, dtype)
    run_views(fl.fill, out, value)
    want = torch.zeros(shape, dtype=torch.float32 if dtype is BF16 else None).numpy()
    if dtype is not BF16:
        want = torch.from_numpy(np.zeros(shape, dtype)).fill_(value).numpy()
    else:
        want = fl.fill_ref(shape, value).astype(BF16)
    np.testing.assert_array_equal(out, want)


def test_fill_strided_output_and_int64():
    base = np.full(200, -1.0, np.float32)
    view = Strided(base, (7, 9), (20, 2), offset=3)
    got = run_views(fl.fill, view, 4.25)[0]
    np.testing.assert_array_equal(Strided(got, view.shape, view.strides, 3).expected(), 4.25)
    assert (got == 4.25).sum() == 63
    big = np.zeros((3, 4, 2), np.int32)
    run_views(fl.fill, big, -(2**40) - 5, int64=True)
    np.testing.assert_array_equal(unpairs(big), -(2**40) - 5)


def test_fill_issues_one_memset_and_one_dma_per_tile():
    prog = program_of(fl.fill, np.zeros((4, 4), np.float32), 1.0)
    assert [i.opcode for i in prog] == ["memset", "dma_copy"]


@pytest.mark.parametrize(
    ("n", "dtype", "start", "step"),
    [
        (10, np.int32, 0, 1),
        (129, np.int32, -50, 3),
        (1000, np.float32, 0.5, 0.25),
        (300, BF16, -3.0, 0.1),
        (127, np.int16, 5, -2),
    ],
)
def test_arange_matches_torch(n, dtype, start, step):
    out = np.zeros(n, dtype)
    run_views(fl.arange, out, start, step)
    tdt = torch.bfloat16 if dtype is BF16 else torch.from_numpy(np.zeros(1, dtype)).dtype
    want = torch.arange(start, start + n * step, step, dtype=tdt)[:n]
    want = want.float().numpy().astype(dtype) if dtype is BF16 else want.numpy()
    if dtype in (np.float32, np.float16, BF16):  # PyTorch's bf16 arange rounds step to bf16 first
        assert_close(out, fl.arange_ref((n,), start, step), np.dtype(dtype).name, 2)
    else:
        np.testing.assert_array_equal(out, want)


def test_arange_int64_strided_and_shaped():
    out = np.zeros((50, 2), np.int32)
    run_views(fl.arange, out, -7, 3, int64=True)
    np.testing.assert_array_equal(unpairs(out), np.arange(-7, -7 + 50 * 3, 3))
    base = np.zeros(100, np.int32)
    got = run_views(fl.arange, Strided(base, (20,), (5,), offset=2), 100, -1)[0]
    np.testing.assert_array_equal(got[2::5], np.arange(100, 80, -1))
    shaped = np.zeros((3, 4, 5), np.float32)
    run_views(fl.arange, shaped, 1.0, 2.0)
    np.testing.assert_array_equal(shaped, fl.arange_ref((3, 4, 5), 1.0, 2.0))


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize(
    ("shape", "diagonal"), [((5, 7), 0), ((130, 9), -2), ((2, 3, 6, 6), 1), ((4, 200), 150)]
)
def test_triangle_matches_reference(rng, shape, diagonal, upper):
    x = rng.standard_normal(shape).astype(np.float32)
    out = np.zeros(shape, np.float32)
    run_views(fl.triangle, out, x, diagonal, upper)
    np.testing.assert_array_equal(out, fl.triangle_ref(x, diagonal, upper))


def test_triangle_strided_int64_bf16_and_in_place(rng):
    x = rng.standard_normal((9, 6)).astype(np.float32)
    xt = Strided(np.ascontiguousarray(x.T), (9, 6), (1, 9))  # a transposed view
    out = np.zeros((9, 6), np.float32)
    run_views(fl.triangle, out, xt, 1, True)
    np.testing.assert_array_equal(out, np.triu(x, 1))
    a = rng.integers(-(2**31), 2**31, (4, 5), dtype=np.int64)
    o = np.zeros((4, 5, 2), np.int32)
    run_views(fl.triangle, o, pairs(a), 0, False, True)
    np.testing.assert_array_equal(unpairs(o), np.tril(a))
    b = rng.standard_normal((3, 8, 8)).astype(BF16)
    ob = np.zeros_like(b)
    run_views(fl.triangle, ob, b, -1, False)
    np.testing.assert_array_equal(ob, np.tril(b, -1))
    c = rng.standard_normal((6, 6)).astype(np.float32)
    want = np.triu(c)
    nki.simulate(_triu_in_place)(c)
    np.testing.assert_array_equal(c, want)


def _triu_in_place(t):
    fl.triangle(t, t, 0, True)


@pytest.mark.parametrize(
    ("kernel", "args", "kwargs", "match"),
    [
        (fl.fill, (np.zeros(4, np.uint16), 1), {}, "dtype uint16 is not supported"),
        (fl.arange, (np.zeros(4, np.int32), 0.5, 1), {}, "start=0.5 is not an integer"),
        (fl.arange, (np.zeros(4, np.int32), 2**31 - 2, 1), {}, "leave the int32 range"),
        (fl.triangle, (np.zeros(4, np.float32), np.zeros(4, np.float32)), {}, "at least 2 dims"),
        (
            fl.triangle,
            (np.zeros((2, 2), np.float32), np.zeros((2, 2), np.int32)),
            {},
            "they must match",
        ),
    ],
    ids=["dtype", "int-start", "int32-range", "rank", "dtype-mismatch"],
)
def test_fill_rejections(kernel, args, kwargs, match):
    assert_rejected(match, kernel, *args, **kwargs)
