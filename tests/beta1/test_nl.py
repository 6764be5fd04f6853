"""Beta-1 nl library vs numpy: element-wise math, activations, comparisons, bitvec ops,
reductions, composites, data movement and tile construction."""

from __future__ import annotations

import math

import ml_dtypes
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt
import numpy as np
import pytest
from b1_testing import tile_fn

RNG = np.random.default_rng(0)
X = RNG.uniform(-3, 3, (64, 32)).astype(np.float32)
Y = RNG.uniform(0.5, 2, (64, 32)).astype(np.float32)
POS = RNG.uniform(0.5, 2, (64, 32)).astype(np.float32)
INTS = RNG.integers(0, 100, (64, 32)).astype(np.int32)
S = RNG.integers(0, 5, (64, 32)).astype(np.int32)
_erf = np.vectorize(math.erf)


def _sig(v):
    return 1 / (1 + np.exp(-v))


def _phi(v):
    return 0.5 * (1 + _erf(v / math.sqrt(2)))


BINARY = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": np.divide,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "power": np.power,
    "fmod": np.fmod,
    "mod": np.mod,
    "equal": np.equal,
    "not_equal": np.not_equal,
    "greater": np.greater,
    "greater_equal": np.greater_equal,
    "less": np.less,
    "less_equal": np.less_equal,
    "logical_and": np.logical_and,
    "logical_or": np.logical_or,
    "logical_xor": np.logical_xor,
}
ACTIVATIONS = {
    "exp": np.exp,
    "tanh": np.tanh,
    "sigmoid": _sig,
    "relu": lambda v: np.maximum(v, 0),
    "silu": lambda v: v * _sig(v),
    "silu_dx": lambda v: _sig(v) * (1 + v * (1 - _sig(v))),
    "gelu": lambda v: v * _phi(v),
    "gelu_dx": lambda v: _phi(v) + v * np.exp(-0.5 * v * v) / math.sqrt(2 * math.pi),
    "gelu_apprx_tanh": lambda v: (
        0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3)))
    ),
    "gelu_apprx_sigmoid": lambda v: v * _sig(1.702 * v),
    "mish": lambda v: v * np.tanh(np.log1p(np.exp(v))),
    "softplus": lambda v: np.log1p(np.exp(v)),
    "erf": _erf,
    "erf_dx": lambda v: 2 / math.sqrt(math.pi) * np.exp(-v * v),
    "square": np.square,
    "sign": np.sign,
    "abs": np.abs,
    "negative": np.negative,
    "copy": lambda v: v,
    "sin": np.sin,
    "cos": np.cos,
    "floor": np.floor,
    "ceil": np.ceil,
    "trunc": np.trunc,
    "arctan": lambda v: np.arctan(v),
}
POSITIVE = {
    "log": np.log,
    "sqrt": np.sqrt,
    "rsqrt": lambda v: 1 / np.sqrt(v),
    "reciprocal": lambda v: 1 / v,
}
BITVEC = {
    "bitwise_and": np.bitwise_and,
    "bitwise_or": np.bitwise_or,
    "bitwise_xor": np.bitwise_xor,
    "left_shift": np.left_shift,
    "right_shift": np.right_shift,
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary(name):
    got = tile_fn(lambda a, b: getattr(nl, name)(a, b), X, Y)
    with np.errstate(invalid="ignore"):  # power of a negative base: NaN on both sides
        want = BINARY[name](X, Y).astype(np.float64)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_unary(name):
    x = X * 0.5 if name == "arctan" else X
    got = tile_fn(lambda a: getattr(nl, name)(a), x)
    np.testing.assert_allclose(got, ACTIVATIONS[name](x).astype(np.float32), rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("name", sorted(POSITIVE))
def test_unary_positive(name):
    got = tile_fn(lambda a: getattr(nl, name)(a), POS)
    np.testing.assert_allclose(got, POSITIVE[name](POS), rtol=2e-6)


def test_tan_with_range_reduction():
    x = RNG.uniform(-1.2, 1.2, (64, 32)).astype(np.float32)
    np.testing.assert_allclose(tile_fn(lambda a: nl.tan(a), x), np.tan(x), rtol=1e-5, atol=1e-6)


def test_sin_range_reduction_beyond_pi():
    x = np.linspace(-20, 20, 64 * 32, dtype=np.float32).reshape(64, 32)
    np.testing.assert_allclose(tile_fn(lambda a: nl.sin(a), x), np.sin(x), atol=1e-5)


@pytest.mark.parametrize("name", sorted(BITVEC))
def test_bitvec(name):
    np.testing.assert_array_equal(
        tile_fn(lambda a, b: getattr(nl, name)(a, b), INTS, S), BITVEC[name](INTS, S)
    )


def test_invert_and_logical_not():
    np.testing.assert_array_equal(tile_fn(lambda a: nl.invert(a), INTS), np.invert(INTS))
    np.testing.assert_array_equal(
        tile_fn(lambda a: nl.logical_not(a), X > 0), np.logical_not(X > 0)
    )


def test_dtype_and_scalar_promotion():
    h = X.astype(np.float16)
    assert tile_fn(lambda a: a + 1.5, h).dtype == np.float32  # weak float -> fp32
    assert tile_fn(lambda a: nl.add(a, 1.5, dtype=nl.float16), h).dtype == np.float16
    b = X.astype(ml_dtypes.bfloat16)
    assert tile_fn(lambda a, c: a + c, h, b).dtype == np.float32  # (fp16, bf16) -> fp32
    assert tile_fn(lambda a: a > 0, X).dtype == np.bool_
    np.testing.assert_allclose(tile_fn(lambda a: 2.0 - a, X), 2.0 - X)
    np.testing.assert_allclose(tile_fn(lambda a: 1.0 / a, POS), 1.0 / POS, rtol=1e-6)


@pytest.mark.parametrize(
    ("name", "ref"),
    [("sum", np.sum), ("max", np.max), ("min", np.min), ("mean", np.mean), ("var", np.var)],
)
def test_reductions(name, ref):
    got = tile_fn(lambda a: getattr(nl, name)(a, axis=1), X)
    assert got.shape == (64, 1)
    np.testing.assert_allclose(got[:, 0], ref(X, axis=1), rtol=1e-5, atol=1e-6)


def test_prod_all_and_keepdims_and_multi_axis():
    x = RNG.uniform(0.5, 1.5, (32, 4, 6)).astype(np.float32)
    np.testing.assert_allclose(
        tile_fn(lambda a: nl.prod(a, axis=[1, 2]), x)[:, 0], x.prod(axis=(1, 2)), rtol=1e-5
    )
    got = tile_fn(lambda a: nl.sum(a, axis=1, keepdims=True), x)
    assert got.shape == (32, 1, 6)
    np.testing.assert_allclose(got, x.sum(axis=1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(tile_fn(lambda a: nl.max(a, axis=1), x), x.max(axis=1))
    np.testing.assert_array_equal(
        tile_fn(lambda a: nl.all(a, axis=1), X > -2)[:, 0], (X > -2).all(axis=1)
    )


def test_softmax_and_rms_norm():
    e = np.exp(X - X.max(axis=1, keepdims=True))
    np.testing.assert_allclose(
        tile_fn(lambda a: nl.softmax(a, axis=1), X),
        e / e.sum(axis=1, keepdims=True),
        rtol=1e-5,
        atol=1e-7,
    )
    w = RNG.uniform(0.5, 1.5, (1, 32)).astype(np.float32)
    got = tile_fn(lambda a, g: nl.rms_norm(a, g, axis=1, n=32, epsilon=1e-6), X, w)
    want = X / np.sqrt((X * X).sum(axis=1, keepdims=True) / 32 + 1e-6) * w
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_matmul_with_and_without_transpose_x():
    a = RNG.standard_normal((64, 96)).astype(np.float32)
    b = RNG.standard_normal((96, 128)).astype(np.float32)
    np.testing.assert_allclose(
        tile_fn(lambda x, y: nl.matmul(x, y), a, b), a @ b, rtol=1e-4, atol=1e-4
    )
    np.testing.assert_allclose(
        tile_fn(lambda x, y: nl.matmul(x, y, transpose_x=True), a.T.copy(), b),
        a @ b,
        rtol=1e-4,
        atol=1e-4,
    )


def test_transpose_and_load_transpose2d():
    np.testing.assert_array_equal(tile_fn(lambda a: nl.transpose(a), X), X.T)
    np.testing.assert_array_equal(tile_fn(lambda a: nl.transpose(a), X[:16, :16]), X[:16, :16].T)

    @nki.jit
    def kernel(a):
        out = nl.ndarray((32, 64), dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load_transpose2d(a))
        return out

    np.testing.assert_array_equal(kernel(X), X.T)


def test_copy_broadcast_expand_where_dropout():
    np.testing.assert_array_equal(
        tile_fn(lambda a: nl.copy(a, dtype=nl.float16), X), X.astype(np.float16)
    )
    np.testing.assert_array_equal(
        tile_fn(lambda a: nl.broadcast_to(a, shape=(64, 32)), X[:1]),
        np.broadcast_to(X[:1], (64, 32)),
    )
    np.testing.assert_array_equal(
        tile_fn(lambda a: nl.copy(nl.expand_dims(a, 2)), X), X[:, :, None]
    )
    np.testing.assert_array_equal(
        tile_fn(lambda a, b: nl.where(a > 0, a, b), X, Y), np.where(X > 0, X, Y)
    )
    np.testing.assert_array_equal(
        tile_fn(lambda a: nl.where(a > 0, a, -1.0), X), np.where(X > 0, X, -1.0)
    )
    kept = tile_fn(lambda a: nl.dropout(a, 0.5), POS)
    zero = kept == 0
    assert 0.3 < zero.mean() < 0.7
    np.testing.assert_array_equal(kept[~zero], POS[~zero])


def test_gather_flattened():
    idx = RNG.integers(0, 32, (64, 16)).astype(np.uint32)
    np.testing.assert_array_equal(
        tile_fn(lambda a, i: nl.gather_flattened(a, i), X, idx),
        np.take_along_axis(X, idx.astype(np.int64), axis=1),
    )


def test_creation_functions():
    @nki.jit
    def kernel(a):
        out = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.full((4, 8), 2.5, nl.float32) + nl.ones((4, 8), nl.float32)
        t = t + nl.zeros_like(t) + nl.zeros((4, 8), nl.float32)
        e = nl.empty_like(t)
        e[...] = t
        nl.store(out, value=e)
        return out

    np.testing.assert_array_equal(kernel(X), np.full((4, 8), 3.5))


def test_shared_constant_and_identity():
    @nki.jit
    def kernel(a):
        c = nl.shared_constant(np.arange(8, dtype=np.float32).reshape(1, 8))
        ident = nl.load(nl.shared_identity_matrix(4, dtype=nl.float32))
        row = nl.load(c).broadcast_to((4, 8))
        out = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.add(row, nl.matmul(ident, row)))
        return out

    np.testing.assert_allclose(kernel(X), 2 * np.broadcast_to(np.arange(8.0), (4, 8)))


def test_rand_and_random_seed():
    @nki.jit
    def kernel(a):
        nl.random_seed(7)
        out = nl.ndarray((64, 32), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.rand((64, 32)))
        return out

    r = kernel(X)
    assert (r >= 0).all() and (r < 1).all() and 0.2 < r.std() < 0.4
    np.testing.assert_array_equal(kernel(X), r)  # deterministic


def test_indirect_load_store_and_atomic_rmw():
    data = RNG.standard_normal((100, 16)).astype(np.float32)
    rows = RNG.permutation(100)[:32].reshape(32, 1).astype(np.int32)
    vals = RNG.standard_normal((32, 16)).astype(np.float32)

    @nki.jit
    def gather(d, ix):
        out = nl.ndarray((32, 16), dtype=d.dtype, buffer=nl.shared_hbm)
        it = nl.load(ix)
        i_p, i_f = nl.arange(32)[:, None], nl.arange(16)[None, :]
        nl.store(out, value=nl.load(d[it[i_p, 0], i_f]))
        return out

    @nki.jit
    def scatter_add(d: nt.mutable_tensor, ix, v):
        it = nl.load(ix)
        i_p, i_f = nl.arange(32)[:, None], nl.arange(16)[None, :]
        nl.atomic_rmw(d[it[i_p, 0], i_f], value=nl.load(v), op=np.add)
        return d

    @nki.jit
    def scatter(d: nt.mutable_tensor, ix, v):
        it = nl.load(ix)
        i_p, i_f = nl.arange(32)[:, None], nl.arange(16)[None, :]
        nl.store(d[it[i_p, 0], i_f], value=nl.load(v))
        return d

    np.testing.assert_array_equal(gather(data, rows), data[rows[:, 0]])
    want = data.copy()
    want[rows[:, 0]] += vals
    np.testing.assert_allclose(scatter_add(data.copy(), rows, vals), want, rtol=1e-6)
    want = data.copy()
    want[rows[:, 0]] = vals
    np.testing.assert_array_equal(scatter(data.copy(), rows, vals), want)


def test_loop_reduce():
    @nki.jit
    def kernel(x):
        out = nl.ndarray((64, 8), dtype=x.dtype, buffer=nl.shared_hbm)
        b = nl.full((64, 8), -1e30, dtype=nl.float32)
        for k in nl.affine_range(4):
            b = nl.loop_reduce(nl.load(x[:, k * 8 : (k + 1) * 8]), op=np.maximum, loop_indices=[k])
        nl.store(out, value=b)
        return out

    np.testing.assert_array_equal(kernel(X), X.reshape(64, 4, 8).max(axis=1))


def test_device_print_static_cast_finfo_constants(capsys):
    @nki.jit
    def kernel(x):
        t = nl.load(x[0:2, 0:3])
        nl.device_print("tile:", t)
        out = nl.ndarray((2, 3), dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=t)
        return out

    kernel(X)
    assert "tile:" in capsys.readouterr().out
    np.testing.assert_array_equal(
        nl.static_cast(np.array([1.5, -2.5, 300.0]), nl.int8), [2, -2, 127]
    )
    assert nl.finfo(nl.float8_e4m3).max == 240.0  # the legacy cFP8
    assert nl.fp32.min == np.finfo(np.float32).min
    assert nl.bfp16.min == -np.inf  # bit pattern 0xff80
    assert nl.float32r == nl.float32 and nl.tfloat32.itemsize == 4


def test_tile_size_and_buffers():
    @nki.jit
    def kernel(x):
        assert nl.tile_size.pmax == 128 and nl.tile_size.gemm_moving_fmax == 512
        assert nl.tile_size.psum_fmax == 512 and nl.tile_size.bn_stats_fmax == 512
        h = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.hbm)
        p = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.private_hbm)
        assert h.buffer is nl.private_hbm and p.buffer is nl.private_hbm
        z = nl.zeros((4, 4), dtype=nl.float32, buffer=nl.psum)
        assert z.buffer is nl.psum
        out = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=z)
        return out

    np.testing.assert_array_equal(kernel(X), np.zeros((4, 4)))


def test_iterators_and_program_identity():
    @nki.jit
    def kernel(x):
        out = nl.ndarray((2, 3, 1, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        p, q = nl.program_id(0), nl.program_id(1)
        assert nl.num_programs() == 6 and nl.num_programs(1) == 3 and nl.program_ndim() == 2
        t = nl.zeros((1, 4), dtype=nl.float32)
        for i in nl.static_range(2):
            for j in nl.sequential_range(1, 3):
                for k in range(2):
                    t[...] = t + (i + j + k)
        nl.store(out[p, q], value=t + (10 * p + q))
        return out

    got = kernel[2, 3](X)
    want = np.fromfunction(lambda p, q, a, b: 10 * p + q + 20, (2, 3, 1, 4))
    np.testing.assert_array_equal(got, want)
