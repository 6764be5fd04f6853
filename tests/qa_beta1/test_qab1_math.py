"""Every B1 nl element-wise math / activation function and reduction, with dtype= and a
ragged partition mask (`mask=(i_p < n)`), against float64 NumPy; B1 tile operators with
scalars and (P, 1) / (1, F) broadcasting."""

from __future__ import annotations

import warnings

import ml_dtypes
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np
import pytest
from scipy import special

N_ROWS = 100  # rows the mask keeps; rows N_ROWS..127 of the output must stay untouched
RNG = np.random.default_rng(11)
XP = (RNG.random((128, 32)) * 2 + 0.1).astype(np.float32)  # positive: log/sqrt/rsqrt/...
YP = (RNG.random((128, 32)) * 2 + 0.1).astype(np.float32)


def _sig(v):
    return 1 / (1 + np.exp(-v))


UNARY = {
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "rsqrt": lambda v: 1 / np.sqrt(v),
    "tanh": np.tanh,
    "sigmoid": _sig,
    "relu": lambda v: np.maximum(v, 0),
    "silu": lambda v: v * _sig(v),
    "silu_dx": lambda v: _sig(v) * (1 + v * (1 - _sig(v))),
    "gelu": lambda v: 0.5 * v * (1 + special.erf(v / np.sqrt(2))),
    "gelu_dx": lambda v: (
        0.5 * (1 + special.erf(v / np.sqrt(2))) + v * np.exp(-v * v / 2) / np.sqrt(2 * np.pi)
    ),
    "gelu_apprx_tanh": lambda v: (
        0.5 * v * (1 + np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v**3)))
    ),
    "gelu_apprx_sigmoid": lambda v: v * _sig(1.702 * v),
    "mish": lambda v: v * np.tanh(np.log1p(np.exp(v))),
    "softplus": lambda v: np.log1p(np.exp(v)),
    "erf": special.erf,
    "erf_dx": lambda v: 2 / np.sqrt(np.pi) * np.exp(-v * v),
    "square": np.square,
    "sign": np.sign,
    "abs": np.abs,
    "reciprocal": lambda v: 1 / v,
    "negative": np.negative,
    "sin": np.sin,
    "cos": np.cos,
    "floor": np.floor,
    "ceil": np.ceil,
    "trunc": np.trunc,
    "copy": lambda v: v,
}
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
}


def _masked_call(fn, binary: bool, dtype):
    """out[:N_ROWS] = fn(x[, y], dtype=dtype, mask=(i_p < N_ROWS)); the rest of out is 0."""

    def kernel(a, b):
        out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(32)[None, :]
        ta, tb = nl.load(a), nl.load(b)
        nl.store(out, nl.zeros((128, 32), dtype=nl.float32))
        m = i_p < N_ROWS
        r = fn(ta, tb, dtype=dtype, mask=m) if binary else fn(ta, dtype=dtype, mask=m)
        nl.store(out[i_p, i_f], value=r, mask=m)
        return out

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return nki.jit(kernel)(XP, YP)


def _check(out, want, tol):
    np.testing.assert_allclose(out[:N_ROWS], want[:N_ROWS], rtol=tol, atol=tol)
    assert not out[N_ROWS:].any(), "the mask must leave rows >= N_ROWS untouched"


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_fp32_with_mask(name):
    out = _masked_call(getattr(nl, name), False, nl.float32)
    _check(out, UNARY[name](XP.astype(np.float64)), 2e-3)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_fp32_with_mask(name):
    out = _masked_call(getattr(nl, name), True, nl.float32)
    _check(out, BINARY[name](XP.astype(np.float64), YP.astype(np.float64)), 2e-3)


@pytest.mark.parametrize("name", ["exp", "tanh", "sqrt", "gelu", "reciprocal", "abs"])
def test_unary_bf16_output_is_rounded_to_bf16(name):
    out = _masked_call(getattr(nl, name), False, nl.bfloat16)
    want = UNARY[name](XP.astype(np.float64))
    _check(out, want, 1e-2)
    # values really went through bf16 storage (8 mantissa bits)
    assert np.array_equal(out, out.astype(ml_dtypes.bfloat16).astype(np.float32))


@pytest.mark.parametrize("name", ["add", "multiply", "divide", "maximum"])
def test_binary_bf16_output(name):
    out = _masked_call(getattr(nl, name), True, nl.bfloat16)
    _check(out, BINARY[name](XP.astype(np.float64), YP.astype(np.float64)), 1e-2)
    assert np.array_equal(out, out.astype(ml_dtypes.bfloat16).astype(np.float32))


@pytest.mark.parametrize(
    ("name", "ref"),
    [("sum", np.sum), ("max", np.max), ("min", np.min), ("mean", np.mean), ("prod", np.prod)],
)
def test_reductions_with_dtype_keepdims_and_masks(name, ref):
    a = (1 + 0.01 * XP) if name == "prod" else XP - 1

    @nki.jit
    def kernel(x):
        out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(32)[None, :]
        nl.store(out, nl.zeros((128, 1), dtype=nl.float32))
        r = getattr(nl, name)(
            nl.load(x), axis=1, keepdims=True, dtype=nl.float32, mask=(i_p < N_ROWS) & (i_f < 20)
        )
        nl.store(out[i_p, 0], value=r, mask=(i_p < N_ROWS))
        return out

    out = kernel(a)
    want = ref(a[:, :20].astype(np.float64), axis=1, keepdims=True)
    _check(out, want, 1e-4)


def test_reduction_over_two_free_axes_and_var():
    @nki.jit
    def kernel(x):
        s = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        v = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x.reshape((128, 4, 8)))
        nl.store(s, nl.sum(t, axis=(1, 2)))
        nl.store(v, nl.var(nl.load(x), axis=1))
        return s, v

    s, v = kernel(XP)
    x64 = XP.astype(np.float64)
    np.testing.assert_allclose(s[:, 0], x64.sum(1), rtol=1e-5)
    np.testing.assert_allclose(v[:, 0], x64.var(1), rtol=1e-4)


def test_softmax_by_hand_and_nl_softmax_agree_with_numpy():
    @nki.jit
    def kernel(x):
        o1 = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        o2 = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        e = nl.exp(t - nl.max(t, axis=1, keepdims=True))
        nl.store(o1, e / nl.sum(e, axis=1, keepdims=True))
        nl.store(o2, nl.softmax(t, axis=1))
        return o1, o2

    x64 = XP.astype(np.float64) * 3
    e = np.exp(x64 - x64.max(1, keepdims=True))
    want = e / e.sum(1, keepdims=True)
    for out in kernel((XP * 3).astype(np.float32)):
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-7)


def test_operators_scalars_and_broadcasting():
    col = (RNG.random((128, 1)) + 0.5).astype(np.float32)
    row = (RNG.random((1, 32)) + 0.5).astype(np.float32)

    @nki.jit
    def kernel(x, c, r):
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        t, tc, tr = nl.load(x), nl.load(c), nl.load(r)
        y = (t + tc) * 2.0 - t / tc  # (P, F) with (P, 1): free-axis broadcast
        y = 1.0 - y
        y = nl.add(y, tr)  # (1, F): partition broadcast (nl.add only)
        y = nl.where(t > tc, y, -y)
        y = y * (t >= 1.0) + (-y) ** 2 / 4.0
        nl.store(out, y)
        return out

    x, c, r = (v.astype(np.float64) for v in (XP, col, row))
    y = 1.0 - ((x + c) * 2 - x / c) + r
    y = np.where(x > c, y, -y)
    y = y * (x >= 1.0) + (-y) ** 2 / 4
    np.testing.assert_allclose(kernel(XP, col, row), y, rtol=1e-5, atol=1e-5)


def test_comparison_tiles_store_as_uint8_and_bitwise_ints():
    ints = RNG.integers(-100, 100, (128, 32)).astype(np.int32)

    @nki.jit
    def kernel(x, i):
        m = nl.ndarray(x.shape, dtype=nl.uint8, buffer=nl.shared_hbm)
        b = nl.ndarray(i.shape, dtype=nl.int32, buffer=nl.shared_hbm)
        nl.store(m, nl.load(x) > 1.0)
        ti = nl.load(i)
        nl.store(b, (ti & 0xF) | (ti ^ 3))
        return m, b

    m, b = kernel(XP, ints)
    np.testing.assert_array_equal(m, (XP > 1).astype(np.uint8))
    np.testing.assert_array_equal(b, (ints & 0xF) | (ints ^ 3))


def test_float_to_int_rounds_to_nearest_even_and_saturates():
    v = np.array([[0.5, 1.5, 2.5, -0.5, -1.5, 3e9, -3e9, 2.4999]], np.float32).repeat(128, 0)

    @nki.jit
    def kernel(x):
        a = nl.ndarray(x.shape, dtype=nl.int32, buffer=nl.shared_hbm)
        b = nl.ndarray(x.shape, dtype=nl.int32, buffer=nl.shared_hbm)
        t = nl.load(x)
        nl.store(a, nl.copy(t, dtype=nl.int32))
        nl.store(b, nl.load(x, dtype=nl.int32))
        return a, b

    want = np.array([0, 2, 2, 0, -2, 2**31 - 1, -(2**31), 2], np.int64)
    for out in kernel(v):
        np.testing.assert_array_equal(out[0], want)
