"""trnsim.kernels.reduce: reductions over every axis subset of strided views against the float64
references, exact integer paths, int64 pair views, NaN/inf semantics and rejections."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from kernel_testing import BF16, RTOL, Strided
from trnsim.kernels import reduce as R
from views_testing import assert_rejected_views, launch, strided_of, transposed


def keep(shape, dims):
    return tuple(1 if a in dims else n for a, n in enumerate(shape))


def close(got, want, dtype_name="float32", factor=4.0):
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape
    tol = factor * RTOL[dtype_name]
    scale = float(np.max(np.abs(want[np.isfinite(want)]), initial=0.0)) or 1.0
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale / 16)


def pairs(a: np.ndarray) -> np.ndarray:
    """An int64 array as the int32 pair array the device passes ([..., 2], low word first)."""
    return np.ascontiguousarray(a.astype(np.int64)).view(np.int32).reshape(*a.shape, 2)


def from_pairs(p: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(p).view(np.int64).reshape(p.shape[:-1])


SUBSETS = [d for r in (1, 2, 3) for d in itertools.combinations(range(3), r)]


@pytest.mark.parametrize("dims", SUBSETS, ids=lambda d: "dims" + "".join(map(str, d)))
@pytest.mark.parametrize("op", ["sum", "amax", "logsumexp"])
def test_every_axis_subset_of_3d(rng, dims, op):
    x = rng.standard_normal((3, 130, 5)).astype(np.float32)
    (out,) = launch(R.reduce, np.zeros(keep(x.shape, dims), np.float32), x, dims=dims, op=op)[:1]
    close(out, R.reduce_ref(x, dims, op))


@pytest.mark.parametrize("dims", SUBSETS, ids=lambda d: "dims" + "".join(map(str, d)))
def test_var_every_axis_subset_of_permuted_view(rng, dims):
    xv, xs = transposed(rng, (4, 33, 6), np.float32, (2, 0, 1))
    xv = xv * 3 + 10  # an offset mean: the pairwise merge keeps the deviations accurate
    xs.base[:] = np.ascontiguousarray(xv.transpose(2, 0, 1)).reshape(-1)
    out = launch(R.var, np.zeros(keep(xv.shape, dims), np.float32), xs, dims=dims)[0]
    close(out, R.var_ref(xv, dims, 1))


@pytest.mark.parametrize(
    ("shape", "dims"),
    [
        pytest.param((1,), (0,), id="one-element"),
        pytest.param((4000, 3), (1,), id="rows-G-per-partition"),
        pytest.param((129, 9000), (1,), id="rows-chunked"),
        pytest.param((2, 5001), (1,), id="columns-two-outputs"),
        pytest.param((7, 13, 61), (0, 1, 2), id="columns-full"),
        pytest.param((3, 4097, 5), (1,), id="columns-strided-kept"),
    ],
)
@pytest.mark.parametrize("op", ["sum", "mean", "prod", "amin", "logsumexp", "var"])
def test_layouts(rng, shape, dims, op):
    x = rng.standard_normal(shape).astype(np.float32)
    if op == "prod":
        x = (1 + x / 64).astype(np.float32)
    out = np.zeros(keep(shape, dims), np.float32)
    if op == "var":
        got = launch(R.var, out, x, dims=dims, correction=0)[0]
        close(got, R.var_ref(x, dims, 0))
    else:
        got = launch(R.reduce, out, x, dims=dims, op=op)[0]
        close(got, R.reduce_ref(x, dims, op), factor=16 if op == "prod" else 4)


@pytest.mark.parametrize("max_slots", [16, 2], ids=["slots16", "slots2"])
def test_leading_axis_and_slot_reuse(rng, monkeypatch, max_slots):
    """Sums, maxima and minima over a leading axis read whole rows per partition (columns
    layout, GpSimd partition fold; minima through negation or bit inversion); with two slots
    the partial states are combined and reused, partial remainder tiles included."""
    from trnsim.kernels import _reduce_layout

    monkeypatch.setattr(_reduce_layout, "MAX_SLOTS", max_slots)
    x = rng.standard_normal((1000, 64)).astype(np.float32)
    for op in ("sum", "amin", "amax", "logsumexp"):
        got = launch(R.reduce, np.zeros((1, 64), np.float32), x, dims=0, op=op)[0]
        close(got, R.reduce_ref(x, 0, op))
    xi = rng.integers(-(2**31), 2**31 - 1, size=(1000, 64)).astype(np.int32)
    got = launch(R.reduce, np.zeros((1, 64), np.int32), xi, dims=0, op="amin")[0]
    np.testing.assert_array_equal(got, xi.min(axis=0, keepdims=True))
    got = launch(R.var, np.zeros((5, 1), np.float32), x.reshape(5, 12800), dims=1)[0]
    close(got, R.var_ref(x.reshape(5, 12800), 1, 1))
    wv, wi = R.arg_reduce_ref(x, None, "max")
    got = launch(
        R.arg_reduce, np.zeros((1,), np.float32), pairs(np.zeros((1,))), x, dim=None, op="max"
    )[:2]
    np.testing.assert_array_equal(got[0], wv.reshape(1))
    np.testing.assert_array_equal(from_pairs(got[1]), wi)


def test_transposed_full_reduction_reads_memory_order(rng):
    """A full reduction of x.t() reduces in memory order: one merged axis, a handful of
    instructions (not one tile per pair of elements)."""
    from trnsim.nki.runner import run_kernel

    base = rng.standard_normal((3, 7000)).astype(np.float32)
    xs = Strided(base, (7000, 3), (1, 7000))
    got = launch(R.reduce, np.zeros((1, 1), np.float32), xs, dims=None, op="sum")[0]
    close(got, R.reduce_ref(xs.expected(), None, "sum"))

    def kernel(out, x):
        R.reduce(out, x.ap([[1, 7000], [7000, 3]], offset=0), dims=None, op="sum")

    prog = run_kernel(kernel, [np.zeros((1, 1), np.float32), base], {}, chip="trn3").program
    assert len(prog) <= 12


@pytest.mark.parametrize("p", [2, 1, 0, np.inf, -np.inf])
def test_norms(rng, p):
    x = rng.standard_normal((6, 300)).astype(np.float32)
    x[0, :7] = 0.0
    got = launch(R.reduce, np.zeros((6, 1), np.float32), x, dims=1, op="norm", p=p)[0]
    close(got, R.reduce_ref(x, 1, "norm", p))


@pytest.mark.parametrize("dtype", [np.float32, BF16], ids=["fp32", "bf16"])
def test_strided_and_broadcast_inputs(rng, dtype):
    base = rng.standard_normal((9, 40)).astype(dtype)
    view = base[1::2, ::3]  # sliced with steps and an offset
    got = launch(R.reduce, np.zeros((4, 1), dtype), strided_of(base, view), dims=1, op="sum")[0]
    close(got, R.reduce_ref(view, 1, "sum"), np.dtype(dtype).name)
    row = rng.standard_normal(50).astype(dtype)
    bcast = Strided(row, (7, 50), (0, 1))  # x.expand(7, 50)
    got = launch(R.reduce, np.zeros((1, 50), np.float32), bcast, dims=0, op="mean")[0]
    close(got, R.reduce_ref(bcast.expected(), 0, "mean"))


def test_bf16_output_cast_once(rng):
    x = rng.standard_normal((64, 700)).astype(BF16)
    got = launch(R.reduce, np.zeros((64, 1), BF16), x, dims=1, op="sum")[0]
    want = R.reduce_ref(x, 1, "sum").astype(np.float32).astype(BF16)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=2**-7)


def test_int32_sums_are_exact(rng):
    x = rng.integers(2**24, 2**24 + 1000, size=(5, 20)).astype(np.int32)
    x[:, 0] = -(2**25) + 1  # odd values beyond fp32's 24 bits
    for dims in [(1,), (0, 1)]:
        got = launch(R.reduce, np.zeros(keep(x.shape, dims), np.int32), x, dims=dims, op="sum")[0]
        np.testing.assert_array_equal(got, x.astype(np.int64).sum(axis=dims, keepdims=True))
    big = rng.integers(-(2**30), 2**30, size=(3, 3000)).astype(np.int32)
    got = launch(R.reduce, np.zeros((1, 1), np.int32), big, dims=(0, 1), op="amax")[0]
    assert got[0, 0] == big.max()
    got = launch(R.reduce, np.zeros((3, 1), np.int32), big, dims=1, op="amin")[0]
    np.testing.assert_array_equal(got[:, 0], big.min(axis=1))


@pytest.mark.parametrize("max_slots", [16, 2], ids=["slots16", "slots2"])
def test_int64_sums_beyond_int32(rng, monkeypatch, max_slots):
    """Integer sums into int64 are exact past 2^31 (16-bit split words) in every layout, while
    the sum of |x| stays below 2^47."""
    from trnsim.kernels import _reduce_layout

    monkeypatch.setattr(_reduce_layout, "MAX_SLOTS", max_slots)
    x = rng.integers(-(2**26), 2**26, size=(130, 5000)).astype(np.int32)
    x[:, :2500] = np.abs(x[:, :2500]) + 2**25  # same-sign runs: sums far past int32
    for dims in [(1,), (0,), (0, 1)]:
        shape = keep(x.shape, dims)
        got = launch(R.reduce, pairs(np.zeros(shape)), x, dims=dims, op="sum", int64=("out",))[0]
        np.testing.assert_array_equal(
            from_pairs(got), x.astype(np.int64).sum(axis=dims, keepdims=True)
        )
    v = rng.integers(-(2**31), 2**31 - 1, size=(2, 3000))
    got = launch(R.reduce, pairs(np.zeros((2, 1))), pairs(v), dims=1, op="sum", int64=("x", "out"))[
        0
    ]
    np.testing.assert_array_equal(from_pairs(got), v.sum(axis=1, keepdims=True))


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16])
def test_small_int_products_and_sums(rng, dtype):
    x = rng.integers(0, 3, size=(4, 9)).astype(dtype)
    got = launch(R.reduce, np.zeros((4, 1), np.int32), x, dims=1, op="prod")[0]
    np.testing.assert_array_equal(got[:, 0], x.astype(np.int64).prod(axis=1))
    got = launch(R.reduce, pairs(np.zeros((1, 9))), x, dims=0, op="sum", int64=("out",))[0]
    np.testing.assert_array_equal(from_pairs(got), x.astype(np.int64).sum(0, keepdims=True))


def test_bool_sum_to_int64_and_all_any(rng):
    x = rng.random((70, 33)) < 0.3
    got = launch(R.reduce, pairs(np.zeros((70, 1))), x, dims=1, op="sum", int64=("out",))[0]
    np.testing.assert_array_equal(from_pairs(got), x.sum(axis=1, keepdims=True))
    for op, f in (("all", np.all), ("any", np.any)):
        got = launch(R.reduce, np.zeros((1, 33), bool), x, dims=0, op=op)[0]
        np.testing.assert_array_equal(got, f(x, axis=0, keepdims=True))
    got = launch(R.reduce, np.zeros((1, 1), np.bool_), x, dims=None, op="amax")[0]
    assert bool(got[0, 0]) == bool(x.any())


def test_int64_pair_input_and_output(rng):
    v = rng.integers(-(2**31), 2**31 - 1, size=(6, 40))
    base = pairs(v)
    # a transposed int64 view: [40, 6] with strides (1, 40) in int64 elements
    xs = Strided(base, (40, 6, 2), (2, 80, 1))
    got = launch(R.reduce, pairs(np.zeros((40, 1))), xs, dims=1, op="amax", int64=("x", "out"))[0]
    np.testing.assert_array_equal(from_pairs(got), v.T.max(axis=1, keepdims=True))
    small = rng.integers(-1000, 1000, size=(6, 40))
    got = launch(
        R.reduce, pairs(np.zeros((6, 1))), pairs(small), dims=1, op="sum", int64=("x", "out")
    )[0]
    np.testing.assert_array_equal(from_pairs(got), small.sum(axis=1, keepdims=True))


def test_nan_and_inf_semantics():
    x = np.array(
        [[1.0, np.nan, 3.0], [1.0, 2.0, 3.0], [-np.inf, -np.inf, -np.inf], [np.inf, 1.0, 2.0]],
        np.float32,
    )
    for op in ("amax", "amin", "logsumexp", "sum", "any", "all"):
        out = np.zeros((4, 1), bool if op in ("any", "all") else np.float32)
        got = launch(R.reduce, out, x, dims=1, op=op)[0]
        close(got, R.reduce_ref(x, 1, op))


def test_var_std_var_mean_corrections(rng):
    x = (rng.standard_normal((5, 8)) * 2 + 100).astype(np.float32)
    for c in (0, 1, 2):
        got = launch(R.std, np.zeros((5, 1), np.float32), x, dims=1, correction=c)[0]
        close(got, np.sqrt(R.var_ref(x, 1, c)))
    v, m = launch(R.var_mean, np.zeros((1, 8), np.float32), np.zeros((1, 8), BF16), x, dims=0)[:2]
    close(v, R.var_ref(x, 0, 1))
    close(m, R.reduce_ref(x, 0, "mean"), "bfloat16")
    one = np.array([[3.0], [4.0]], np.float32)  # N = 1: 0/0 = NaN with correction 1
    got = launch(R.var, np.zeros((2, 1), np.float32), one, dims=1)[0]
    assert np.isnan(got).all()


@pytest.mark.parametrize(
    ("shape", "dim", "perm"),
    [
        pytest.param((5, 7), 1, (0, 1), id="rows"),
        pytest.param((4000, 3), 1, (0, 1), id="rows-G"),
        pytest.param((130, 5000), 1, (0, 1), id="rows-chunked"),
        pytest.param((3, 5000), 1, (0, 1), id="columns"),
        pytest.param((6, 5, 70), 0, (2, 0, 1), id="permuted-dim0"),
        pytest.param((3, 4, 5), None, (0, 1, 2), id="flat-small"),
        pytest.param((100, 41), None, (1, 0), id="flat-columns-transposed"),
    ],
)
@pytest.mark.parametrize("op", ["max", "min"])
def test_arg_reduce(rng, shape, dim, perm, op):
    xv, xs = transposed(rng, shape, np.float32, perm)
    flat = xs.base  # plant ties and a NaN: the first occurrence must win
    flat[flat.size // 3] = flat[flat.size // 2] = 1e4 if op == "max" else -1e4
    xv = xs.expected()
    wv, wi = R.arg_reduce_ref(xv, dim, op)
    got_v, got_i = launch(
        R.arg_reduce, np.zeros(wv.shape, np.float32), pairs(np.zeros(wi.shape)), xs, dim=dim, op=op
    )[:2]
    np.testing.assert_array_equal(from_pairs(got_i), wi)
    np.testing.assert_array_equal(got_v, wv)


def test_arg_reduce_nan_ints_and_no_values(rng):
    x = rng.standard_normal((4, 300)).astype(BF16)
    x[1, 7] = x[1, 100] = np.nan
    wv, wi = R.arg_reduce_ref(x.astype(np.float32), 1, "min")
    got = launch(R.arg_reduce, None, pairs(np.zeros(wi.shape)), x, dim=1, op="min")[1]
    np.testing.assert_array_equal(from_pairs(got), wi)
    big = rng.integers(-(2**31), 2**31 - 1, size=(3, 2500))
    big[0, 5] = big[0, 9] = big[0].max() + 1  # ties of values above 2^24: exact on GpSimd
    wv, wi = R.arg_reduce_ref(big, -1, "max")
    got_v, got_i = launch(
        R.arg_reduce,
        pairs(np.zeros(wv.shape)),
        pairs(np.zeros(wi.shape)),
        pairs(big),
        dim=-1,
        op="max",
        int64=("x", "values"),
    )[:2]
    np.testing.assert_array_equal(from_pairs(got_i), wi)
    np.testing.assert_array_equal(from_pairs(got_v), wv)


@pytest.mark.parametrize(
    ("kernel", "kwargs", "args", "match"),
    [
        pytest.param(
            R.reduce,
            {"op": "mean", "dims": 1},
            (np.zeros((2, 1), np.float32), np.zeros((2, 3), np.int32)),
            "only for floating-point",
            id="mean-of-int",
        ),
        pytest.param(
            R.reduce,
            {"op": "median", "dims": 1},
            (np.zeros((2, 1), np.float32), np.zeros((2, 3), np.float32)),
            "op 'median' is not supported",
            id="op",
        ),
        pytest.param(
            R.reduce,
            {"op": "norm", "p": 3, "dims": 1},
            (np.zeros((2, 1), np.float32), np.zeros((2, 3), np.float32)),
            "p=3 is not supported",
            id="norm-p",
        ),
        pytest.param(
            R.reduce,
            {"op": "sum", "dims": 1},
            (np.zeros((2, 3), np.float32), np.zeros((2, 3), np.float32)),
            r"needs \[2, 1\]",
            id="out-shape",
        ),
        pytest.param(
            R.reduce,
            {"op": "sum", "dims": 2},
            (np.zeros((2, 1), np.float32), np.zeros((2, 3), np.float32)),
            "outside",
            id="dims",
        ),
        pytest.param(
            R.var,
            {"dims": 1},
            (np.zeros((2, 1), np.float32), np.zeros((2, 3), np.int8)),
            "only for floating-point",
            id="var-of-int",
        ),
        pytest.param(
            R.arg_reduce,
            {"op": "max", "dim": (0, 1)},
            (None, np.zeros((1, 1, 2), np.int32), np.zeros((2, 3), np.float32)),
            "one axis or None",
            id="arg-dims",
        ),
        pytest.param(
            R.reduce,
            {"op": "sum", "dims": 0, "int64": ("x",)},
            (np.zeros((1, 3), np.float32), np.zeros((2, 3), np.float32)),
            "not an int32 pair view",
            id="int64-flag",
        ),
    ],
)
def test_rejections(kernel, kwargs, args, match):
    assert_rejected_views(match, kernel, *args, **kwargs)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(8))
def test_random_shapes_and_views(seed):
    rng = np.random.default_rng(500 + seed)
    rank = int(rng.integers(1, 5))
    shape = tuple(int(rng.integers(1, 300 if rank <= 2 else 40)) for _ in range(rank))
    perm = tuple(rng.permutation(rank))
    xv, xs = transposed(rng, shape, np.float32, perm)
    dims = tuple(sorted(set(int(d) for d in rng.integers(0, rank, size=int(rng.integers(1, 4))))))
    for op in ("sum", "amax", "logsumexp", "norm"):
        got = launch(R.reduce, np.zeros(keep(shape, dims), np.float32), xs, dims=dims, op=op)[0]
        close(got, R.reduce_ref(xv, dims, op))
    got = launch(R.var, np.zeros(keep(shape, dims), np.float32), xs, dims=dims, correction=0)[0]
    close(got, R.var_ref(xv, dims, 0))
