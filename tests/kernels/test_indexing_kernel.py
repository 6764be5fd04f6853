"""trnsim.kernels.indexing: index_select, index, index_put, index_add, embedding_backward,
gather and scatter on strided views against numpy, duplicate indices, int64 pair views and
out-of-range index errors."""

from __future__ import annotations

import numpy as np
import pytest
import views_testing
from kernel_testing import BF16, Strided
from source_paths import assert_no_internal_path
from trnsim.kernels import indexing as I
from views_testing import assert_rejected_views, launch, strided_of, transposed

from trnsim.errors import OutOfBoundsError


def pairs(a: np.ndarray) -> np.ndarray:
    return (
        np.ascontiguousarray(np.asarray(a).astype(np.int64)).view(np.int32).reshape(*np.shape(a), 2)
    )


def from_pairs(p: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(p).view(np.int64).reshape(p.shape[:-1])


def assert_out_of_bounds(match: str, kernel, *args, **attrs) -> None:
    """The launch raises OutOfBoundsError(match) located at the kernel's caller (the launch
    helper's line, or this file's wrapper of a list-taking kernel)."""
    with pytest.raises(OutOfBoundsError, match=match) as exc:
        launch(kernel, *args, **attrs)
    assert exc.value.loc is not None
    assert exc.value.loc.filename in (views_testing.__file__, __file__)
    assert_no_internal_path(exc.value.message)


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_index_select_every_dim_of_a_permuted_view(rng, dim):
    xv, xs = transposed(rng, (7, 5, 130), np.float32, (2, 0, 1))
    n = xv.shape[dim]
    idx = np.concatenate([rng.integers(0, n, 129), [n - 1, 0, 0]]).astype(np.int32)
    out = np.zeros(
        tuple(len(idx) if k == dim % 3 else s for k, s in enumerate(xv.shape)), np.float32
    )
    got = launch(I.index_select, out, xs, idx, dim=dim)[0]
    np.testing.assert_array_equal(got, np.take(xv, idx, axis=dim))


def test_index_select_int64_index_and_int64_data(rng):
    data = rng.integers(-(2**40), 2**40, size=(9, 4))
    idx = np.array([8, 0, 8, 3])
    got = launch(
        I.index_select,
        pairs(np.zeros((4, 4))),
        pairs(data),
        pairs(idx),
        dim=0,
        int64=("x", "out", "index"),
    )[0]
    np.testing.assert_array_equal(from_pairs(got), data[idx])
    x = rng.standard_normal((3, 6)).astype(BF16)
    got = launch(
        I.index_select, np.zeros((3, 2), BF16), x, pairs(np.array([5, 1])), dim=1, int64=("index",)
    )[0]
    np.testing.assert_array_equal(got, x[:, [5, 1]])


@pytest.mark.parametrize(
    ("bad", "text"), [(7, "index 7 is out of bounds"), (-1, "index -1 is out of bounds")]
)
def test_index_select_out_of_range(bad, text):
    x = np.zeros((7, 3), np.float32)
    assert_out_of_bounds(
        f"index_select: {text} for dimension 0 with size 7",
        I.index_select,
        np.zeros((2, 3), np.float32),
        x,
        np.array([1, bad], np.int32),
        dim=0,
    )


def _index_of(*spec):
    """I.index with its index list built from the launch's arguments (`spec`: "t" for the
    next tensor argument, None for a whole axis)."""

    def kernel(out, x, *ts, **attrs):
        it = iter(ts)
        I.index(out, x, [next(it) if s == "t" else None for s in spec], **attrs)

    return kernel


def _index_put_of(n):
    def kernel(out, values, *ts, **attrs):
        I.index_put(out, list(ts[:n]), values, **attrs)

    return kernel


def test_index_advanced_forms(rng):
    x = rng.standard_normal((6, 5, 4)).astype(np.float32)
    i0 = np.array([[0, -1, 2], [5, 3, -6]], np.int32)
    i1 = Strided(np.array([4, 0, -2], np.int32), (2, 3), (0, 1))  # broadcast over rows
    j1 = i1.expected()
    got = launch(_index_of("t", "t"), np.zeros((2, 3, 4), np.float32), x, i0, i1)[0]
    np.testing.assert_array_equal(got, x[i0, j1])
    got = launch(_index_of(None, "t", "t"), np.zeros((6, 2, 3), np.float32), x, i0 % 5, j1 % 4)[0]
    np.testing.assert_array_equal(got, x[:, i0 % 5, j1 % 4])
    got = launch(_index_of("t", None, "t"), np.zeros((2, 3, 5), np.float32), x, i0, j1 % 4)[0]
    np.testing.assert_array_equal(got, x[i0, :, j1 % 4])
    got = launch(
        _index_of("t"),
        np.zeros((3, 5, 4), np.float32),
        x,
        pairs(np.array([-6, 0, 5])),
        int64=("indices",),
    )[0]
    np.testing.assert_array_equal(got, x[[-6, 0, 5]])


def test_index_many_rows(rng):
    """Index words of all full tiles load in one DMA per index tensor (1-d index shape)."""
    x = rng.standard_normal((40, 50)).astype(np.float32)
    i0 = rng.integers(-40, 40, 400).astype(np.int32)
    i1 = rng.integers(-50, 50, 400).astype(np.int32)
    got = launch(_index_of("t", "t"), np.zeros(400, np.float32), x, i0, i1)[0]
    np.testing.assert_array_equal(got, x[i0, i1])
    got = launch(I.index_select, np.zeros((300, 50), np.float32), x, i0[:300] % 40, dim=0)[0]
    np.testing.assert_array_equal(got, x[i0[:300] % 40])
    i1[260] = 50
    assert_out_of_bounds(
        "index: index 50 is out of bounds for dimension 1 with size 50",
        _index_of("t", "t"),
        np.zeros(400, np.float32),
        x,
        i0,
        i1,
    )


def test_index_out_of_range_names_the_axis():
    x = np.zeros((6, 5), np.float32)
    assert_out_of_bounds(
        "index: index 5 is out of bounds for dimension 1 with size 5",
        _index_of("t", "t"),
        np.zeros((2,), np.float32),
        x,
        np.array([0, 1], np.int32),
        np.array([2, 5], np.int32),
    )
    assert_out_of_bounds(
        "index: index -7 is out of bounds for dimension 0 with size 6",
        _index_of("t"),
        np.zeros((1, 5), np.float32),
        x,
        np.array([-7], np.int32),
    )


def test_index_put_and_accumulate_with_duplicates(rng):
    out = rng.standard_normal((8, 3)).astype(np.float32)
    idx = np.array([1, 7, 1, 1, -1], np.int32)
    vals = rng.standard_normal((5, 3)).astype(np.float32)
    want = out.astype(np.float64)
    np.add.at(want, idx, vals)
    got = launch(_index_put_of(1), out.copy(), vals, idx, accumulate=True)[0]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    uniq = np.array([0, 5, 2], np.int32)
    got = launch(_index_put_of(1), out.copy(), vals[:3], uniq, accumulate=False)[0]
    want = out.copy()
    want[uniq] = vals[:3]
    np.testing.assert_array_equal(got, want)
    # two index tensors, a broadcast (stride-0) value
    o2 = np.zeros((4, 5), np.float32)
    r, c = np.array([0, 3, 3], np.int32), np.array([4, 0, 0], np.int32)
    got = launch(
        _index_put_of(2),
        o2.copy(),
        Strided(np.array([2.5], np.float32), (3,), (0,)),
        r,
        c,
        accumulate=True,
    )[0]
    want = o2.copy()
    np.add.at(want, (r, c), 2.5)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.float32, BF16, np.int32], ids=["fp32", "bf16", "int32"])
def test_index_add_duplicates_alpha(rng, dtype):
    out = (rng.standard_normal((4, 9)) * 4).astype(dtype)
    src = (rng.standard_normal((4, 6)) * 4).astype(dtype)
    idx = np.array([8, 0, 8, 8, 2, 0], np.int32)
    alpha = 2 if dtype == np.int32 else 0.5
    got = launch(I.index_add, out.copy(), idx, src, dim=1, alpha=alpha)[0]
    want = out.astype(np.float64)
    np.add.at(want.T, idx, alpha * src.astype(np.float64).T)
    tol = 2**-6 if dtype == BF16 else 1e-6
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol * 8)


def test_embedding_backward(rng):
    v, d = 11, 40
    ind = rng.integers(0, v, size=(3, 50)).astype(np.int32)
    ind[0, :5] = 4  # a frequent token and padding
    g = rng.standard_normal((3, 50, d)).astype(np.float32)
    got = launch(
        I.embedding_backward,
        np.full((v, d), np.nan, np.float32),
        g,
        ind,
        padding_idx=4,
        scale_grad_by_freq=True,
    )[0]
    counts = np.bincount(ind.ravel(), minlength=v)
    want = np.zeros((v, d))
    np.add.at(want, ind.ravel(), g.reshape(-1, d) / counts[ind.ravel()][:, None])
    want[4] = 0.0
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    got = launch(
        I.embedding_backward, np.zeros((v, d), np.float32), g, pairs(ind), int64=("indices",)
    )[0]
    want = np.zeros((v, d))
    np.add.at(want, ind.ravel(), g.reshape(-1, d))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    wide = np.full((301, 8), np.nan, np.float32)  # cleared as [100, 3, 8] and [1, 1, 8] tiles
    few = np.array([[300, 0, 300]], np.int32)
    g8 = rng.standard_normal((1, 3, 8)).astype(np.float32)
    got = launch(I.embedding_backward, wide, g8, few)[0]
    want = np.zeros((301, 8))
    np.add.at(want, few.ravel(), g8.reshape(-1, 8))
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert_out_of_bounds(
        "embedding_backward: index 11 is out of bounds for dimension 0",
        I.embedding_backward,
        np.zeros((v, d), np.float32),
        g[:1, :2],
        np.array([[3, 11]], np.int32),
    )


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_gather_every_dim(rng, dim):
    xv, xs = transposed(rng, (5, 6, 7), np.float32, (1, 2, 0))
    shape = [4, 3, 2]
    shape[dim] = 9
    idx = rng.integers(0, xv.shape[dim], shape).astype(np.int32)
    got = launch(I.gather, np.zeros(shape, np.float32), xs, idx, dim=dim)[0]
    np.testing.assert_array_equal(got, I.gather_ref(xv, dim, idx))


def test_gather_many_rows_int64_and_long_axis(rng):
    x = rng.standard_normal((500, 12)).astype(np.float32)  # G rows per partition
    idx = rng.integers(0, 12, (500, 3))
    got = launch(I.gather, np.zeros((500, 3), np.float32), x, pairs(idx), dim=1, int64=("index",))[
        0
    ]
    np.testing.assert_array_equal(got, I.gather_ref(x, 1, idx))
    data = rng.integers(-(2**40), 2**40, size=(130, 5))
    idx = rng.integers(0, 5, (130, 2)).astype(np.int32)
    got = launch(I.gather, pairs(np.zeros((130, 2))), pairs(data), idx, dim=1, int64=("x", "out"))[
        0
    ]
    np.testing.assert_array_equal(from_pairs(got), I.gather_ref(data, 1, idx))
    base = rng.standard_normal((4, 10001)).astype(BF16)  # gathered by indirect DMA
    long = base[1:, 1:]  # a view with an offset
    idx = np.array([[9999, 0], [5, 5], [1234, 9998]], np.int32)
    got = launch(I.gather, np.zeros((3, 2), BF16), strided_of(base, long), idx, dim=1)[0]
    np.testing.assert_array_equal(got, I.gather_ref(long, 1, idx))


@pytest.mark.parametrize("shape", [(2, 4), (300, 4), (2, 10000)], ids=["one", "G", "dma"])
def test_gather_out_of_range(shape):
    idx = np.zeros((shape[0], 1), np.int32)
    idx[-1, 0] = -1
    assert_out_of_bounds(
        f"gather: index -1 is out of bounds for dimension 1 with size {shape[1]}",
        I.gather,
        np.zeros(idx.shape, np.float32),
        np.zeros(shape, np.float32),
        idx,
        dim=1,
    )


@pytest.mark.parametrize("reduce", [None, "add", "multiply"])
def test_scatter_with_duplicates(rng, reduce):
    out = rng.standard_normal((5, 7)).astype(np.float32)
    if reduce is None:
        idx = np.stack([rng.permutation(7)[:4] for _ in range(3)]).astype(np.int32)
    else:
        idx = rng.integers(0, 7, (3, 4)).astype(np.int32)
        idx[0] = [2, 2, 2, 6]
    src = (1 + rng.standard_normal((4, 6)) / 4).astype(np.float32)  # larger than index
    got = launch(I.scatter, out.copy(), idx, src, dim=1, reduce=reduce)[0]
    np.testing.assert_allclose(got, I.scatter_ref(out, 1, idx, src, reduce), rtol=1e-6)
    idx0 = rng.integers(0, 5, (3, 7)).astype(np.int32)
    if reduce is None:
        idx0 = np.stack([rng.permutation(5)[:3] for _ in range(7)], axis=1).astype(np.int32)
    got = launch(I.scatter_value, out.copy(), idx0, value=-2.0, dim=0, reduce=reduce)[0]
    np.testing.assert_allclose(got, I.scatter_ref(out, 0, idx0, -2.0, reduce), rtol=1e-6)


def test_scatter_many_positions_one_hot(rng):
    """Many positions, few entries each (one_hot, nll backward): positions on partitions."""
    labels = rng.integers(0, 10, (300, 1)).astype(np.int32)
    got = launch(I.scatter_value, np.zeros((300, 10), BF16), labels, value=1.0, dim=1)[0]
    want = np.eye(10, dtype=np.float32)[labels[:, 0]]
    np.testing.assert_array_equal(got.astype(np.float32), want)
    out = rng.standard_normal((300, 10)).astype(np.float32)
    idx = np.concatenate([labels, labels], axis=1)  # duplicates within a row
    src = rng.standard_normal((300, 2)).astype(np.float32)
    got = launch(I.scatter, out.copy(), idx, src, dim=1, reduce="add")[0]
    np.testing.assert_allclose(got, I.scatter_ref(out, 1, idx, src, "add"), rtol=1e-6, atol=1e-6)
    bad = labels.copy()
    bad[200, 0] = 10
    assert_out_of_bounds(
        "scatter_value: index 10 is out of bounds for dimension 1 with size 10",
        I.scatter_value,
        np.zeros((300, 10), np.float32),
        bad,
        value=1.0,
        dim=1,
    )


def test_scatter_int64_value_and_errors():
    out = pairs(np.zeros((2, 4)))
    idx = np.array([[3], [0]], np.int32)
    got = launch(I.scatter_value, out, idx, value=-(2**40), dim=1, int64=("out",))[0]
    want = np.zeros((2, 4), np.int64)
    want[0, 3] = want[1, 0] = -(2**40)
    np.testing.assert_array_equal(from_pairs(got), want)
    assert_out_of_bounds(
        "scatter: index 4 is out of bounds for dimension 1 with size 4",
        I.scatter,
        np.zeros((2, 4), np.float32),
        np.array([[4]], np.int32),
        np.ones((1, 1), np.float32),
        dim=1,
    )
    assert_out_of_bounds(
        "scatter_value\\(reduce='multiply'\\): index -1 is out of bounds",
        I.scatter_value,
        np.zeros((2, 4), np.float32),
        np.array([[-1]], np.int32),
        value=2.0,
        dim=1,
        reduce="multiply",
    )


@pytest.mark.parametrize(
    ("kernel", "args", "kwargs", "match"),
    [
        pytest.param(
            I.index_select,
            (np.zeros((2, 3), np.float32), np.zeros((4, 3), np.float32), np.zeros(2, np.float32)),
            {"dim": 0},
            "index tensors are int32",
            id="index-dtype",
        ),
        pytest.param(
            I.index_select,
            (np.zeros((2, 3), np.float32), np.zeros((4, 3), BF16), np.zeros(2, np.int32)),
            {"dim": 0},
            "dtypes must match",
            id="dtypes",
        ),
        pytest.param(
            I.index_select,
            (np.zeros((3, 3), np.float32), np.zeros((4, 3), np.float32), np.zeros(2, np.int32)),
            {"dim": 0},
            r"gives \[2, 3\]",
            id="out-shape",
        ),
        pytest.param(
            I.index_select,
            (np.zeros((2, 3), np.float32), np.zeros((4, 3), np.float32), np.zeros(2, np.int32)),
            {"dim": 2},
            "dim=2 is outside",
            id="dim",
        ),
        pytest.param(
            I.gather,
            (
                np.zeros((2, 2), np.float32),
                np.zeros((4, 3), np.float32),
                np.zeros((2, 4), np.int32),
            ),
            {"dim": 0},
            "exceeds x shape",
            id="gather-shape",
        ),
        pytest.param(
            I.scatter,
            (
                np.zeros((4, 3), np.float32),
                np.zeros((2, 2), np.int32),
                np.zeros((2, 2), np.float32),
            ),
            {"dim": 0, "reduce": "max"},
            "reduce must be",
            id="scatter-reduce",
        ),
        pytest.param(
            I.index_add,
            (pairs(np.zeros((4, 3))), np.zeros(2, np.int32), pairs(np.zeros((2, 3)))),
            {"dim": 0, "int64": ("out", "src")},
            "int64 out",
            id="index-add-int64",
        ),
    ],
)
def test_rejections(kernel, args, kwargs, match):
    assert_rejected_views(match, kernel, *args, **kwargs)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_random_shapes(seed):
    rng = np.random.default_rng(900 + seed)
    rank = int(rng.integers(1, 4))
    shape = tuple(int(rng.integers(1, 160 if rank == 1 else 40)) for _ in range(rank))
    xv, xs = transposed(rng, shape, np.float32, tuple(rng.permutation(rank)))
    dim = int(rng.integers(0, rank))
    n = int(rng.integers(1, 300))
    idx = rng.integers(0, shape[dim], n).astype(np.int32)
    out_shape = tuple(n if k == dim else s for k, s in enumerate(shape))
    got = launch(I.index_select, np.zeros(out_shape, np.float32), xs, idx, dim=dim)[0]
    np.testing.assert_array_equal(got, np.take(xv, idx, axis=dim))
    src = rng.standard_normal(out_shape).astype(np.float32)
    got = launch(I.index_add, xv.copy(), idx, src, dim=dim)[0]
    want = np.moveaxis(xv.astype(np.float64).copy(), dim, 0)
    np.add.at(want, idx, np.moveaxis(src, dim, 0))
    np.testing.assert_allclose(got, np.moveaxis(want, 0, dim), rtol=1e-5, atol=1e-5)
    gshape = tuple(int(rng.integers(1, s + 1)) if k != dim else n for k, s in enumerate(shape))
    gidx = rng.integers(0, shape[dim], gshape).astype(np.int32)
    got = launch(I.gather, np.zeros(gshape, np.float32), xs, gidx, dim=dim)[0]
    np.testing.assert_array_equal(got, I.gather_ref(xv, dim, gidx))
    sidx = gidx[tuple(slice(0, min(a, b)) for a, b in zip(gshape, shape, strict=True))]
    ssrc = rng.standard_normal(sidx.shape).astype(np.float32)
    got = launch(I.scatter, xv.copy(), sidx, ssrc, dim=dim, reduce="add")[0]
    np.testing.assert_allclose(got, I.scatter_ref(xv, dim, sidx, ssrc, "add"), rtol=1e-5, atol=1e-5)
