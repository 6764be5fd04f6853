"""nl.* convenience wrappers vs numpy computed another way, and the instructions they issue."""

from __future__ import annotations

import math

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from nl_testing import run_tile
from source_paths import assert_no_internal_path

import trnsim
from trnsim.errors import ConstraintError
from trnsim.nki.runner import record_launches, stop_recording

RNG = np.random.default_rng(0)
X = RNG.standard_normal((128, 64)).astype(np.float32)
Y = (RNG.standard_normal((128, 64)) + 3).astype(np.float32)
POS = (np.abs(X) + 0.1).astype(np.float32)

_erf = np.vectorize(math.erf)


def _phi(x):
    return 0.5 * (1 + _erf(x / math.sqrt(2)))


def _sig(x):
    return 1 / (1 + np.exp(-x))


UNARY = {
    "exp": (np.exp, X),
    "log": (np.log, POS),
    "sqrt": (np.sqrt, POS),
    "rsqrt": (lambda x: 1 / np.sqrt(x), POS),
    "tanh": (np.tanh, X),
    "square": (np.square, X),
    "sign": (np.sign, X),
    "abs": (np.abs, X),
    "relu": (lambda x: np.maximum(x, 0), X),
    "sigmoid": (_sig, X),
    "silu": (lambda x: x * _sig(x), X),
    "gelu": (lambda x: x * _phi(x), X),
    "gelu_apprx_tanh": (
        lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
        X,
    ),
    "gelu_apprx_sigmoid": (lambda x: x * _sig(1.702 * x), X),
    "softplus": (lambda x: np.log1p(np.exp(x)), X),
    "mish": (lambda x: x * np.tanh(np.log1p(np.exp(x))), X),
    "erf": (_erf, X),
    "reciprocal": (lambda x: 1 / x, Y),
    "negative": (np.negative, X),
    "sin": (np.sin, X * 3),
    "cos": (np.cos, X * 3),
    "tan": (np.tan, X * 0.3),
    "trunc": (np.trunc, X * 3),
    "floor": (np.floor, X * 3),
    "ceil": (np.ceil, X * 3),
    "copy": (lambda x: x, X),
    "logical_not": (lambda x: (x == 0).astype(np.float32), np.round(X).astype(np.float32)),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_matches_numpy(name):
    ref, arg = UNARY[name]
    out = run_tile(getattr(nl, name), arg)
    np.testing.assert_allclose(out, ref(arg.astype(np.float64)), rtol=2e-5, atol=2e-5)


BINARY = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": np.divide,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "fmod": np.fmod,
    "mod": np.mod,
    "abs_max": lambda x, y: np.where(np.abs(x) > np.abs(y), x, y),
    "abs_min": lambda x, y: np.where(np.abs(x) < np.abs(y), x, y),
    "equal": lambda x, y: (x == y).astype(np.float32),
    "not_equal": lambda x, y: (x != y).astype(np.float32),
    "greater": lambda x, y: (x > y).astype(np.float32),
    "greater_equal": lambda x, y: (x >= y).astype(np.float32),
    "less": lambda x, y: (x < y).astype(np.float32),
    "less_equal": lambda x, y: (x <= y).astype(np.float32),
    "logical_and": lambda x, y: np.logical_and(x, y).astype(np.float32),
    "logical_or": lambda x, y: np.logical_or(x, y).astype(np.float32),
    "logical_xor": lambda x, y: np.logical_xor(x, y).astype(np.float32),
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_tile_tile_and_tile_scalar(name):
    ref = BINARY[name]
    x = np.round(X * 2) if name.startswith(("logical", "equal", "not_equal")) else X
    x = x.astype(np.float32)
    np.testing.assert_allclose(run_tile(getattr(nl, name), x, Y), ref(x, Y), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(
        run_tile(lambda a: getattr(nl, name)(a, 1.5), x),
        ref(x, np.float32(1.5)),
        rtol=1e-6,
        atol=1e-6,
    )


def test_scalar_first_operand_is_reversed():
    np.testing.assert_allclose(run_tile(lambda a: nl.subtract(10.0, a), X), 10.0 - X, rtol=1e-6)
    np.testing.assert_allclose(run_tile(lambda a: nl.divide(1.0, a), Y), 1.0 / Y, rtol=1e-6)


def test_partition_column_operand_broadcasts_along_free_dim():
    col = Y[:, 0:1].copy()
    np.testing.assert_allclose(run_tile(nl.multiply, X, col), X * col, rtol=1e-6)
    np.testing.assert_allclose(run_tile(nl.subtract, col, X), col - X, rtol=1e-6)


def test_power_and_bitwise():
    np.testing.assert_allclose(
        run_tile(nl.power, POS, Y[:, :64] * 0.5), POS.astype(np.float64) ** (Y * 0.5), rtol=1e-5
    )
    a = RNG.integers(0, 1 << 20, (128, 32)).astype(np.int32)
    b = RNG.integers(0, 1 << 20, (128, 32)).astype(np.int32)
    for name, ref in (
        ("bitwise_and", np.bitwise_and),
        ("bitwise_or", np.bitwise_or),
        ("bitwise_xor", np.bitwise_xor),
    ):
        np.testing.assert_array_equal(run_tile(getattr(nl, name), a, b), ref(a, b))
    np.testing.assert_array_equal(run_tile(lambda t: nl.left_shift(t, 3), a), a << 3)
    np.testing.assert_array_equal(run_tile(lambda t: nl.right_shift(t, 2), a), a >> 2)
    np.testing.assert_array_equal(run_tile(nl.invert, a), ~a)


@pytest.mark.parametrize("name", ["sum", "max", "min", "prod", "mean", "var", "all"])
def test_reductions_over_trailing_axes(name):
    x3 = (RNG.standard_normal((128, 4, 16)) * 0.5 + (1.0 if name == "prod" else 0)).astype(
        np.float32
    )
    if name == "all":
        x3 = (np.abs(x3) > 0.3).astype(np.float32)
    ref = {
        "sum": np.sum,
        "max": np.max,
        "min": np.min,
        "prod": np.prod,
        "mean": np.mean,
        "var": np.var,
        "all": lambda a, axis, keepdims: np.all(a, axis=axis, keepdims=keepdims),
    }[name]
    keep = name == "var"  # var always keeps the reduced axes
    for axis in ((2,), (1, 2)):
        out = run_tile(lambda t, axis=axis: getattr(nl, name)(t, axis=axis, keepdims=keep), x3)
        expect = ref(x3.astype(np.float64), axis=axis, keepdims=keep)
        np.testing.assert_allclose(out, expect, rtol=2e-4, atol=1e-5)


def test_reduction_keepdims_shapes():
    out = run_tile(lambda t: nl.sum(t, axis=1, keepdims=True), X)
    assert out.shape == (128, 1)
    out = run_tile(lambda t: nl.max(t, axis=-1), X)
    assert out.shape == (128,)


def test_softmax_and_rms_norm():
    e = np.exp(X.astype(np.float64) - X.max(axis=1, keepdims=True))
    np.testing.assert_allclose(
        run_tile(lambda t: nl.softmax(t, axis=1), X),
        e / e.sum(axis=1, keepdims=True),
        rtol=1e-5,
        atol=1e-7,
    )
    x3 = X.reshape(128, 4, 16)
    e3 = np.exp(x3.astype(np.float64) - x3.max(axis=2, keepdims=True))
    np.testing.assert_allclose(
        run_tile(lambda t: nl.softmax(t, axis=2), x3),
        e3 / e3.sum(axis=2, keepdims=True),
        rtol=1e-5,
        atol=1e-7,
    )
    x64 = X.astype(np.float64)
    ref = x64 / np.sqrt((x64**2).mean(axis=1, keepdims=True) + 1e-6) * Y
    np.testing.assert_allclose(
        run_tile(lambda a, w: nl.rms_norm(a, w, axis=1, n=64), X, Y), ref, rtol=1e-5, atol=1e-5
    )


def test_where_broadcast_to_expand_dims():
    cond = (X > 0).astype(np.float32)
    np.testing.assert_array_equal(run_tile(nl.where, cond, X, Y), np.where(cond > 0, X, Y))
    np.testing.assert_array_equal(
        run_tile(lambda c, a: nl.where(c, a, 0.0), cond, X), np.where(cond > 0, X, 0)
    )
    col = X[:, 0:1].copy()
    np.testing.assert_array_equal(
        run_tile(lambda t: nl.broadcast_to(t, (128, 8)), col), np.broadcast_to(col, (128, 8))
    )
    row = X[0:1, :].copy()
    np.testing.assert_array_equal(
        run_tile(lambda t: nl.broadcast_to(t, (128, 64)), row), np.broadcast_to(row, (128, 64))
    )
    assert run_tile(lambda t: nl.copy(nl.expand_dims(t, 1)), X).shape == (128, 1, 64)


def test_matmul_and_transpose():
    a = RNG.standard_normal((64, 128)).astype(np.float32)
    b = RNG.standard_normal((64, 96)).astype(np.float32)
    np.testing.assert_allclose(
        run_tile(lambda x, y: nl.matmul(x, y, transpose_x=True), a, b),
        a.astype(np.float64).T @ b,
        rtol=1e-4,
        atol=1e-4,
    )
    c = RNG.standard_normal((32, 64)).astype(np.float32)
    np.testing.assert_allclose(
        run_tile(nl.matmul, c, b), c.astype(np.float64) @ b, rtol=1e-4, atol=1e-4
    )
    np.testing.assert_array_equal(run_tile(nl.transpose, a), a.T)
    small = a[:16, :24].copy()
    np.testing.assert_array_equal(run_tile(nl.transpose, small), small.T)


def test_gather_flattened_and_load_transpose2d():
    idx = RNG.integers(0, 64, (128, 16)).astype(np.uint32)
    out = run_tile(nl.gather_flattened, X, idx)
    np.testing.assert_array_equal(out, np.take_along_axis(X, idx.astype(np.int64), axis=1))

    def kernel(src):
        t = nl.load_transpose2d(src)
        out = nl.ndarray(t.shape, t.dtype, buffer=nl.shared_hbm)
        nl.store(out, t)
        return out

    src = X[:, :48].copy()
    np.testing.assert_array_equal(nki.simulate(kernel)(src), src.T)


def test_dtype_argument_casts_result():
    out = run_tile(lambda a, b: nl.add(a, b, dtype=nl.bfloat16), X, Y)
    assert out.dtype == np.dtype(nl.bfloat16.storage)
    np.testing.assert_allclose(out.astype(np.float32), X + Y, rtol=1e-2)


def test_wrappers_issue_the_documented_instructions():
    runs = []
    token = record_launches(runs)
    try:
        run_tile(lambda a: nl.softmax(a, axis=1), X)
        run_tile(nl.exp, X)
        run_tile(nl.add, X, Y)
        run_tile(lambda a: nl.matmul(a[:, :64], a, transpose_x=True), X)
    finally:
        stop_recording(token)
    ops = [[(i.opcode, i.engine) for i in r.program] for r in runs]
    softmax_ops = [o for o, _ in ops[0]]
    assert softmax_ops[:1] == ["dma_copy"]
    assert [o for o in softmax_ops if o not in ("dma_copy",)] == [
        "tensor_reduce",
        "activation",
        "reciprocal",
        "tensor_scalar",
    ]
    assert ("activation", "scalar") in ops[1]
    assert ("tensor_tensor", "vector") in ops[2]
    assert ("nc_matmul", "tensor") in ops[3]


def test_zeros_ones_full_issue_memset():
    runs = []
    token = record_launches(runs)
    try:
        out = run_tile(lambda a: nl.add(a, nl.full((128, 64), 2.5, nl.float32)), X)
    finally:
        stop_recording(token)
    np.testing.assert_allclose(out, X + 2.5, rtol=1e-6)
    assert any(i.opcode == "memset" for i in runs[0].program)


# ---------------------------------------------------------------- errors
def _check_loc(exc, fn):
    assert exc.value.loc is not None
    assert exc.value.loc.function == fn.__name__
    assert_no_internal_path(str(exc.value))


def test_binary_shape_mismatch_error_at_kernel_line():
    def kernel(a, b):
        x = nl.load(a)
        y = nl.load(b)
        return nl.add(x, y)

    with pytest.raises(ConstraintError, match="do not broadcast") as exc:
        nki.simulate(kernel)(X, Y[:, :32].copy())
    _check_loc(exc, kernel)


def test_load_of_sbuf_and_store_of_psum_are_errors():
    def load_sbuf(a):
        x = nl.load(a)
        return nl.load(x)

    with pytest.raises(ConstraintError, match="must be an HBM tensor") as exc:
        nki.simulate(load_sbuf)(X)
    _check_loc(exc, load_sbuf)

    def store_psum(a):
        x = nl.load(a)
        p = nl.matmul(x, x, transpose_x=True)
        out = nl.ndarray(p.shape, p.dtype, buffer=nl.shared_hbm)
        nl.store(out, p)
        return out

    with pytest.raises(ConstraintError, match="cannot read PSUM") as exc:
        nki.simulate(store_psum)(X[:, :64].copy())
    _check_loc(exc, store_psum)


def test_reduction_axis_errors():
    def kernel(a):
        return nl.sum(nl.load(a), axis=0)

    with pytest.raises(ConstraintError, match="axis 0 is the partition axis") as exc:
        nki.simulate(kernel)(X)
    _check_loc(exc, kernel)

    def middle(a):
        return nl.sum(nl.load(a), axis=1)

    with pytest.raises(ConstraintError, match="last contiguous axes"):
        nki.simulate(middle)(X.reshape(128, 4, 16))


def test_op_constants_resolve_by_name():
    assert nl.add.__name__ == "add"
    assert nl.max.__name__ == "max"
    assert nl.exp.__name__ == "exp"

    def kernel(a):
        x = nl.load(a)
        out_t = nl.ndarray(x.shape, x.dtype)
        nisa.tensor_scalar(
            dst=out_t, data=x, op0=nl.multiply, operand0=3.0, op1=nl.add, operand1=1.0
        )
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nl.store(out, out_t)
        return out

    np.testing.assert_allclose(nki.simulate(kernel)(X), X * 3 + 1, rtol=1e-6)
    assert trnsim is not None
