"""trnsim.kernels.pointwise, the further ATen ops of pointwise_extra.py, against PyTorch CPU
(special values included) and the float64 references."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from kernel_testing import BF16, run_views
from trnsim.kernels import pointwise as pw
from trnsim.kernels import pointwise_extra

pytestmark = pytest.mark.filterwarnings("error::trnsim.errors.SimulationWarning")
SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], np.float32)


def run(op, *inputs, out_dtype=np.float32, **attrs):
    out = np.zeros(np.broadcast_shapes(*(np.shape(x) for x in inputs)), out_dtype)
    run_views(pw.pointwise, out, *inputs, op=op, **attrs)
    return out


def close(got, want, rtol=2e-5):
    np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-6, equal_nan=True)


@pytest.fixture
def x(rng):
    return np.concatenate([SPECIALS, (3 * rng.standard_normal(60)).astype(np.float32)])


@pytest.fixture
def unit(rng):
    return np.concatenate([SPECIALS, (1.2 * rng.random(60) - 0.1).astype(np.float32)])


T = torch.from_numpy
UNARY = [
    ("relu6", torch.nn.functional.relu6, "x", {}),
    ("selu", torch.selu, "x", {}),
    ("tan", torch.tan, "x", {}),
    ("atan", torch.atan, "x", {}),
    ("sinh", torch.sinh, "x", {}),
    ("cosh", torch.cosh, "x", {}),
    ("asin", torch.asin, "unit", {}),
    ("acos", torch.acos, "unit", {}),
    ("atanh", torch.atanh, "unit", {}),
    ("logit", torch.logit, "unit", {}),
]


@pytest.mark.parametrize(("op", "fn", "kind", "attrs"), UNARY, ids=[u[0] for u in UNARY])
def test_unary_extra_match_torch(request, op, fn, kind, attrs):
    a = request.getfixturevalue(kind)
    close(run(op, a, **attrs), fn(T(a)).numpy())


def test_parametrized_unary_extra(x, unit):
    close(run("threshold", x, threshold=0.5, value=-2.0), torch.threshold(T(x), 0.5, -2.0).numpy())
    close(run("celu", x[5:], alpha=0.7), torch.celu(T(x[5:]), 0.7).numpy())
    close(run("logit", unit, eps=0.05), torch.logit(T(unit), 0.05).numpy())
    for op in ("isposinf", "isneginf", "signbit"):
        got = run(op, x, out_dtype=np.bool_)
        np.testing.assert_array_equal(got, getattr(torch, op)(T(x)).numpy(), op)
    got = run("signbit", x.astype(BF16), out_dtype=np.bool_)  # 16-bit sign bits
    np.testing.assert_array_equal(got, np.signbit(x))


@pytest.mark.parametrize("op", ["copysign", "fmax", "fmin", "hypot", "xlogy"])
def test_binary_extra_match_torch(x, op):
    y = np.roll(x, 7)
    close(run(op, x, y), getattr(torch, op)(T(x), T(y)).numpy())


def test_binary_extra_scalars_and_floor_divide(rng, x):
    y = np.abs(np.roll(x, 3))
    close(run("xlogy", x, other=2.5), torch.xlogy(T(x), 2.5).numpy())
    close(run("xlogy", y, input=0.0), torch.xlogy(0.0, T(y)).numpy())
    close(run("copysign", x, other=-0.0), torch.copysign(T(x), -0.0).numpy())
    a, b = x[5:], np.where(np.abs(x[5:]) < 0.3, 0.7, x[5:])[::-1].copy()
    close(run("floor_divide", a, b), torch.floor_divide(T(a), T(b)).numpy())
    i = rng.integers(-(2**31), 2**31, 60, dtype=np.int64).astype(np.int32)
    j = rng.integers(1, 300, 60).astype(np.int32) * np.where(rng.random(60) < 0.5, -1, 1)
    got = run("floor_divide", i, j.astype(np.int32), out_dtype=np.int32)
    np.testing.assert_array_equal(got, torch.floor_divide(T(i), T(j.astype(np.int32))).numpy())


@pytest.mark.parametrize("dtype", [np.int32, np.int8])
def test_bit_shifts_match_torch(rng, dtype):
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max + 1, 60, dtype=np.int64).astype(dtype)
    n = rng.integers(0, 8 * info.bits // 8 + 4, 60).astype(dtype)
    for op, fn in (
        ("bitwise_right_shift", torch.bitwise_right_shift),
        ("bitwise_left_shift", torch.bitwise_left_shift),
    ):
        got = run(op, a, n, out_dtype=dtype)
        np.testing.assert_array_equal(got, fn(T(a), T(n)).numpy(), op)
    got = run("bitwise_right_shift", a, out_dtype=dtype, other=3)
    np.testing.assert_array_equal(got, (T(a) >> 3).numpy())


def test_backward_extra_match_torch(rng, x, unit):
    g = rng.standard_normal(65).astype(np.float32)
    xx = np.concatenate([np.array([-3.0, 3.0, -4.0, 4.0, np.nan], np.float32), x[5:]])
    for op in ("hardsigmoid_backward", "hardswish_backward"):
        close(run(op, g, xx), getattr(torch.ops.aten, op)(T(g), T(xx)).numpy())
    for eps in (None, 0.1):
        want = torch.ops.aten.logit_backward(T(g), T(unit), eps).numpy()
        close(run("logit_backward", g, unit, eps=eps), want)


def test_extra_references(rng):
    """Each extra op's float64 reference agrees with the kernel on plain finite inputs."""
    a = (0.9 * rng.random((4, 9)) + 0.05).astype(np.float32)
    b = (0.9 * rng.random((4, 9)) + 0.05).astype(np.float32)
    for spec in pointwise_extra.EXTRA:
        if spec.float_body is None or spec.result == "bool":
            continue
        ins = (b, a) if spec.args[0] == "grad_output" else (a, b)[: len(spec.args)]
        close(run(spec.name, *ins), pw.pointwise_ref(spec.name, *ins), rtol=1e-4)
