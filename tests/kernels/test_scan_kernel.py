"""trnsim.kernels.scan: cumsum and cumprod along every axis of strided views against float64
references, exact integer scans into int64 pair views, chunked long rows, rejections."""

from __future__ import annotations

import numpy as np
import pytest
from kernel_testing import BF16, Strided
from trnsim.kernels import scan as S
from views_testing import assert_rejected_views, launch, transposed


def pairs(a: np.ndarray) -> np.ndarray:
    return (
        np.ascontiguousarray(np.asarray(a).astype(np.int64)).view(np.int32).reshape(*np.shape(a), 2)
    )


def from_pairs(p: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(p).view(np.int64).reshape(p.shape[:-1])


def close(got, want, rtol=1e-5):
    want = np.asarray(want, np.float64)
    scale = np.max(np.abs(want)) or 1.0
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=rtol, atol=rtol * scale)


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
@pytest.mark.parametrize("kernel", [S.cumsum, S.cumprod], ids=["cumsum", "cumprod"])
def test_every_axis_of_a_permuted_view(rng, kernel, dim):
    xv, xs = transposed(rng, (6, 130, 5), np.float32, (1, 2, 0))
    if kernel is S.cumprod:
        xs.base[:] = 1 + xs.base / 32
        xv = xs.expected()
    ref = S.cumsum_ref if kernel is S.cumsum else S.cumprod_ref
    got = launch(kernel, np.zeros(xv.shape, np.float32), xs, dim=dim)[0]
    close(got, ref(xv, dim % 3))


@pytest.mark.parametrize(
    ("shape", "dim"),
    [
        pytest.param((3000, 7), 1, id="short-rows-G"),
        pytest.param((3, 9001), 1, id="long-rows-chunked"),
        pytest.param((1,), 0, id="one-element"),
    ],
)
def test_layouts(rng, shape, dim):
    x = rng.standard_normal(shape).astype(np.float32)
    got = launch(S.cumsum, np.zeros(shape, np.float32), x, dim=dim)[0]
    close(got, S.cumsum_ref(x, dim), rtol=1e-5 * max(1.0, np.sqrt(shape[dim]) / 8))


def test_bf16_and_broadcast_input(rng):
    x = rng.standard_normal((4, 300)).astype(BF16)
    got = launch(S.cumsum, np.zeros((4, 300), BF16), x, dim=1)[0]
    close(got, S.cumsum_ref(x, 1), rtol=2**-7)
    row = Strided(np.arange(1, 6, dtype=np.float32), (3, 5), (0, 1))  # x.expand(3, 5)
    got = launch(S.cumprod, np.zeros((3, 5), np.float32), row, dim=1)[0]
    close(got, S.cumprod_ref(row.expected(), 1))


def test_in_place(rng):
    base = rng.standard_normal((5, 40)).astype(np.float32)
    want = S.cumsum_ref(base, 0)
    v = Strided(base, (5, 40), (40, 1))
    from views_testing import Same

    got = launch(S.cumsum, v, Same(0), dim=0)[0]
    close(got, want)


@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.bool_])
def test_integer_scans_are_exact(rng, dtype):
    if dtype == np.int32:
        x = rng.integers(-(2**30), 2**30, size=(4, 5000)).astype(np.int32)  # chunked rows
        x[:, :3000] = np.abs(x[:, :3000])  # running sums far past int32
    else:
        x = rng.integers(0, 2, size=(300, 9)).astype(dtype)
    got = launch(S.cumsum, pairs(np.zeros(x.shape)), x, dim=1, int64=("out",))[0]
    np.testing.assert_array_equal(from_pairs(got), S.cumsum_ref(x, 1))
    small = rng.integers(-3, 4, size=(5, 12)).astype(np.int32)
    got = launch(S.cumprod, np.zeros((5, 12), np.int32), small, dim=1)[0]
    np.testing.assert_array_equal(got, S.cumprod_ref(small, 1).astype(np.int32))
    big = rng.integers(-(2**40), 2**40, size=(3, 4))
    big[:] = big % 1000
    got = launch(S.cumsum, pairs(np.zeros((3, 4))), pairs(big), dim=0, int64=("x", "out"))[0]
    np.testing.assert_array_equal(from_pairs(got), S.cumsum_ref(big, 0))


def test_nan_and_inf_stay_in_their_row():
    x = np.array([[1.0, np.inf, 2.0], [1.0, 2.0, 3.0], [np.nan, 1.0, 1.0]], np.float32)
    x = np.repeat(x, 200, axis=0)  # G rows per partition: an inf row beside finite ones
    got = launch(S.cumsum, np.zeros(x.shape, np.float32), x, dim=1)[0]
    np.testing.assert_array_equal(got, S.cumsum_ref(x, 1).astype(np.float32))


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        pytest.param(
            (np.zeros((2, 3), np.float32), np.zeros((3, 2), np.float32)),
            {"dim": 0},
            "they must match",
            id="shape",
        ),
        pytest.param(
            (np.zeros((2, 3), np.int32), np.zeros((2, 3), np.float32)),
            {"dim": 0},
            "float x into int32 out",
            id="dtype",
        ),
        pytest.param(
            (np.zeros((2, 3), np.float32), np.zeros((2, 3), np.float32)),
            {"dim": 2},
            "dim=2 is outside",
            id="dim",
        ),
    ],
)
def test_rejections(args, kwargs, match):
    assert_rejected_views(match, S.cumsum, *args, **kwargs)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_random_shapes(seed):
    rng = np.random.default_rng(700 + seed)
    rank = int(rng.integers(1, 4))
    shape = tuple(int(rng.integers(1, 3000 if rank == 1 else 60)) for _ in range(rank))
    xv, xs = transposed(rng, shape, np.float32, tuple(rng.permutation(rank)))
    dim = int(rng.integers(0, rank))
    got = launch(S.cumsum, np.zeros(shape, np.float32), xs, dim=dim)[0]
    close(got, S.cumsum_ref(xv, dim), rtol=1e-5 * max(1.0, np.sqrt(shape[dim]) / 8))
    xi = rng.integers(-1000, 1000, size=shape).astype(np.int32)
    got = launch(S.cumsum, pairs(np.zeros(shape)), xi, dim=dim, int64=("out",))[0]
    np.testing.assert_array_equal(from_pairs(got), S.cumsum_ref(xi, dim))
