"""trnsim.kernels.concat: cat along every axis of strided, broadcast and int64 views against
numpy, float conversion of mixed inputs, and rejections."""

from __future__ import annotations

import numpy as np
import pytest
from kernel_testing import BF16, Strided
from source_paths import assert_no_internal_path
from trnsim.kernels import concat as C
from views_testing import launch, transposed

from trnsim.errors import ConstraintError


def pairs(a: np.ndarray) -> np.ndarray:
    return (
        np.ascontiguousarray(np.asarray(a).astype(np.int64)).view(np.int32).reshape(*np.shape(a), 2)
    )


def from_pairs(p: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(p).view(np.int64).reshape(p.shape[:-1])


def cat_of(out, *inputs, **attrs):
    """C.cat with its input list made of the launch's arguments."""
    C.cat(out, list(inputs), **attrs)


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_cat_every_axis_of_mixed_layouts(rng, dim):
    shape = [3, 5, 129]
    parts = []
    for k, n in enumerate((1, 4, 130)):
        s = list(shape)
        s[dim % 3] = n
        if k == 1:  # a permuted view
            parts.append(transposed(rng, tuple(s), np.float32, (2, 0, 1)))
        else:
            a = rng.standard_normal(s).astype(np.float32)
            parts.append((a, a))
    views = [v for v, _ in parts]
    want = np.concatenate(views, axis=dim)
    got = launch(cat_of, np.zeros(want.shape, np.float32), *[a for _, a in parts], dim=dim)[0]
    np.testing.assert_array_equal(got, want)


def test_cat_broadcast_int64_and_float_conversion(rng):
    row = Strided(np.arange(4, dtype=np.float32), (3, 4), (0, 1))  # expand(3, 4)
    b = rng.standard_normal((2, 4)).astype(BF16)
    c = rng.random((1, 4)) < 0.5
    want = np.concatenate([row.expected(), b.astype(np.float32), c.astype(np.float32)])
    got = launch(cat_of, np.zeros((6, 4), np.float32), row, b, c, dim=0)[0]
    np.testing.assert_array_equal(got, want)
    x, y = rng.integers(-(2**40), 2**40, (2, 3)), rng.integers(-5, 5, (2, 1))
    got = launch(
        cat_of, pairs(np.zeros((2, 4))), pairs(x), pairs(y), dim=1, int64=("out", "inputs")
    )[0]
    np.testing.assert_array_equal(from_pairs(got), np.concatenate([x, y], axis=1))
    z = rng.integers(-(2**31), 2**31 - 1, (2, 2)).astype(np.int32)  # int32 into int64 out
    got = launch(cat_of, pairs(np.zeros((2, 5))), pairs(x), z, dim=1, int64=("out", "inputs.0"))[0]
    np.testing.assert_array_equal(from_pairs(got), np.concatenate([x, z], axis=1))


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        pytest.param(
            (
                np.zeros((4, 3), np.float32),
                np.zeros((2, 3), np.float32),
                np.zeros((1, 3), np.float32),
            ),
            {"dim": 0},
            "sum to 3, out has 4",
            id="total",
        ),
        pytest.param(
            (
                np.zeros((3, 3), np.float32),
                np.zeros((2, 3), np.float32),
                np.zeros((1, 2), np.float32),
            ),
            {"dim": 0},
            "same sizes except",
            id="shape",
        ),
    ],
)
def test_rejections(args, kwargs, match):
    with pytest.raises(ConstraintError, match=match) as exc:
        launch(cat_of, *args, **kwargs)
    loc = exc.value.loc  # the line that called the kernel: cat_of's C.cat(...)
    assert loc is not None and loc.filename == __file__ and "C.cat(" in loc.code
    assert_no_internal_path(exc.value.message)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_random_shapes(seed):
    rng = np.random.default_rng(800 + seed)
    rank = int(rng.integers(1, 4))
    shape = [int(rng.integers(1, 50)) for _ in range(rank)]
    dim = int(rng.integers(0, rank))
    views, args = [], []
    for _ in range(int(rng.integers(1, 5))):
        s = list(shape)
        s[dim] = int(rng.integers(1, 70))
        v, a = transposed(rng, tuple(s), np.float32, tuple(rng.permutation(rank)))
        views.append(v)
        args.append(a)
    want = np.concatenate(views, axis=dim)
    got = launch(cat_of, np.zeros(want.shape, np.float32), *args, dim=dim)[0]
    np.testing.assert_array_equal(got, want)
