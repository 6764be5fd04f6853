"""Scalar Engine semantics (activation, activation_reduce, activate2) vs numpy float64.

References are written independently of trnsim (other formulas, finite differences for the
derivatives); results must be the fp32 rounding of the exact function of the fp32 input.
"""

from __future__ import annotations

import inspect
import math
import warnings

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from source_paths import assert_no_internal_path

from trnsim.errors import ConstraintError, SimulationWarning, UnsupportedError
from trnsim.semantics.activation import ACTIVATIONS, activation_name

P, F = 128, 64


def load(t, dtype=None):
    s = nl.ndarray(t.shape, dtype or t.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=t)
    return s


def store(tile):
    out = nl.ndarray(tile.shape, tile.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=tile)
    return out


def run(kernel, *arrays, chip="trn3"):
    return nki.simulate(kernel, chip=chip)(*arrays)


def expect_error(kernel, arrays, match, chip="trn3", exc_type=ConstraintError):
    """The kernel fails with `match` at its `# BAD` line, with no internal path shown."""
    with pytest.raises(exc_type, match=match) as exc:
        run(kernel, *arrays, chip=chip)
    lines, start = inspect.getsourcelines(kernel)
    assert exc.value.loc.lineno in [start + i for i, ln in enumerate(lines) if "# BAD" in ln]
    assert_no_internal_path(str(exc.value))


def act_kernel(op, out_dtype=nl.float32, **kw):
    def kernel(x):
        xt = load(x)
        out = nl.ndarray(x.shape, out_dtype, buffer=nl.sbuf)
        nisa.activation(dst=out, op=op, data=xt, **kw)
        return store(out)

    return kernel


# ---------------------------------------------------------------- independent references


def _vec(f):
    return np.vectorize(f, otypes=[np.float64])


def _d(f, h=1e-4):
    """Central difference in float64 (error ~h^2 f''' ~ 1e-8)."""
    return lambda x: (f(x + h) - f(x - h)) / (2 * h)


_erf = _vec(math.erf)
_gelu = lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2)))  # noqa: E731
_sig = lambda x: 0.5 * (1 + np.tanh(x / 2))  # noqa: E731
_silu = lambda x: x * _sig(x)  # noqa: E731
_gas = lambda x: x * _sig(1.702 * x)  # noqa: E731
_softplus = lambda x: np.log1p(np.exp(x))  # noqa: E731

REFS = {
    "copy": (lambda x: x, (-4, 4)),
    "bypass": (lambda x: x, (-4, 4)),
    "square": (lambda x: x**2, (-4, 4)),
    "sigmoid": (_sig, (-8, 8)),
    "relu": (lambda x: np.where(x > 0, x, 0.0), (-4, 4)),
    "prelu": (lambda x: np.where(x > 0, x, 0.0), (-4, 4)),  # activation has no relu_param
    "gelu": (_gelu, (-4, 4)),
    "gelu_dx": (_d(_gelu), (-4, 4)),
    "gelu_apprx_tanh": (
        lambda x: 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x**3))),
        (-4, 4),
    ),
    "gelu_apprx_sigmoid": (_gas, (-4, 4)),
    "gelu_apprx_sigmoid_dx": (_d(_gas), (-4, 4)),
    "silu": (_silu, (-6, 6)),
    "silu_dx": (_d(_silu), (-6, 6)),
    "tanh": (_vec(math.tanh), (-4, 4)),
    "softplus": (_softplus, (-6, 6)),
    "mish": (lambda x: x * np.tanh(_softplus(x)), (-4, 4)),
    "erf": (_erf, (-3, 3)),
    "erf_dx": (_d(_erf), (-3, 3)),
    "exp": (_vec(math.exp), (-10, 10)),
    "log": (_vec(math.log), (1e-3, 1e3)),
    "sin": (_vec(math.sin), (-3.1, 3.1)),
    "arctan": (_vec(math.atan), (-1.5, 1.5)),
    "sqrt": (_vec(math.sqrt), (1e-3, 1e3)),
    "rsqrt": (lambda x: x**-0.5, (1e-3, 1e3)),
    "reciprocal": (lambda x: x**-1.0, (0.01, 100)),
    "sign": (np.sign, (-4, 4)),
    "abs": (np.abs, (-4, 4)),
}
DERIVATIVES = ("gelu_dx", "gelu_apprx_sigmoid_dx", "silu_dx", "erf_dx")


def test_reference_table_covers_every_activation():
    assert set(REFS) == set(ACTIVATIONS)


@pytest.mark.parametrize("name", sorted(REFS))
def test_activation_function_matches_reference(rng, name):
    ref, (lo, hi) = REFS[name]
    x = rng.uniform(lo, hi, (P, F)).astype(np.float32)
    if name in ("sign", "abs", "relu", "prelu"):
        x[0, :3] = [0.0, -0.0, 1e-30]
    with warnings.catch_warnings():
        warnings.simplefilter("error", SimulationWarning)  # in range: no warning
        out = run(act_kernel(getattr(nl, name)), x)
    want = ref(x.astype(np.float64))
    tol = {"rtol": 1e-6, "atol": 1e-6} if name in DERIVATIVES else {"rtol": 1.2e-7, "atol": 1e-30}
    np.testing.assert_allclose(out, want, **tol)


@pytest.mark.parametrize("op", ["exp", nl.exp, np.exp], ids=["str", "nl", "numpy"])
def test_op_given_as_string_nl_or_numpy(rng, op):
    x = rng.uniform(-3, 3, (P, F)).astype(np.float32)
    np.testing.assert_allclose(run(act_kernel(op), x), np.exp(x.astype(np.float64)), rtol=1.2e-7)


def test_activation_name_resolution():
    assert activation_name(np.abs) == "abs"
    assert activation_name(np.copy) == "copy"
    assert activation_name(np.tanh) == "tanh"
    assert activation_name(nl.gelu_apprx_sigmoid_dx) == "gelu_apprx_sigmoid_dx"
    with pytest.raises(ConstraintError, match=r"op='cos' is not a Scalar Engine activation"):
        activation_name(np.cos)


# ---------------------------------------------------------------- scale, bias, dtypes


def test_scale_scalar_and_bias_vector_in_fp32(rng):
    def kernel(x, b):
        xt, bt = load(x), load(b)
        out = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=out, op=nl.tanh, data=xt, bias=bt, scale=0.37)
        return store(out)

    x, b = (
        rng.standard_normal((P, F)).astype(np.float32),
        rng.standard_normal((P, 1)).astype(np.float32),
    )
    pre = (x * np.float32(0.37)).astype(np.float32) + b  # two fp32 roundings
    np.testing.assert_allclose(
        run(kernel, x, b, chip="trn1"), np.tanh(pre.astype(np.float64)), rtol=1.2e-7, atol=1e-30
    )


def test_scale_vector_bias_scalar_bf16_in_and_out(rng):
    def kernel(x, s):
        xt, st = load(x), load(s)
        out = nl.ndarray(x.shape, nl.bfloat16, buffer=nl.sbuf)
        nisa.activation(dst=out, op=nl.exp, data=xt, bias=-0.25, scale=st)
        return store(out)

    x = rng.standard_normal((P, F)).astype(ml_dtypes.bfloat16)
    s = rng.uniform(0.5, 2, (P, 1)).astype(np.float32)
    pre = ((x.astype(np.float32) * s).astype(np.float32) + np.float32(-0.25)).astype(np.float32)
    want = np.exp(pre.astype(np.float64)).astype(np.float32).astype(ml_dtypes.bfloat16)
    out = run(kernel, x, s)
    np.testing.assert_array_equal(out.view(np.uint16), want.view(np.uint16))


def test_bias_tensor_of_any_dtype_and_psum_io(rng):
    def kernel(x, b):
        xt, bt = load(x), load(b)
        ps = nl.ndarray(x.shape, nl.float32, buffer=nl.psum)
        nisa.activation(dst=ps, op=nl.copy, data=xt, bias=bt)
        out = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=out, op=nl.square, data=ps)
        return store(out)

    x = rng.standard_normal((64, 8)).astype(np.float32)
    b = rng.integers(-5, 5, (64, 1)).astype(np.int16)
    want = (x + b.astype(np.float32)).astype(np.float64) ** 2
    np.testing.assert_allclose(run(kernel, x, b, chip="trn2"), want, rtol=1.2e-7)


def test_copy_goes_through_fp32():
    """int32 beyond 2^24 rounds on the ScalarE copy (fp32 datapath)."""
    x = np.array([[2**24 + 1, 2**25 + 3, -(2**24) - 1, 7]], dtype=np.int32)
    out = run(act_kernel(nl.copy, out_dtype=nl.int32), x)
    np.testing.assert_array_equal(out, x.astype(np.float32).astype(np.int64))
    assert out[0, 0] == 2**24


# ---------------------------------------------------------------- valid ranges


def test_sin_outside_its_range_extrapolates_like_the_hardware():
    x = np.array([[9.0, -9.0, 3.0, 4.0]], dtype=np.float32)
    with pytest.warns(SimulationWarning, match=r"3 input\(s\) of sin outside its valid range"):
        out = run(act_kernel(nl.sin), x)
    assert out[0, 0] == pytest.approx(27.65, abs=0.01)  # AWS: sin(9.0) returns ~27.65
    assert out[0, 1] == pytest.approx(-27.65, abs=0.01)
    assert out[0, 2] == np.float32(math.sin(3.0))
    d = 4.0 - math.pi
    assert out[0, 3] == pytest.approx(-d + d**3 / 6, rel=1e-6)


def test_other_range_limits_warn_and_use_exact_math():
    x = np.array([[0.0, 2.0**70, 1.0]], dtype=np.float32)
    with pytest.warns(SimulationWarning, match=r"2 input\(s\) of log outside its valid range"):
        out = run(act_kernel(nl.log), x)
    np.testing.assert_array_equal(out, [[-np.inf, np.float32(70 * math.log(2)), 0.0]])
    with pytest.warns(SimulationWarning, match=r"of reciprocal outside its valid range \+-"):
        run(act_kernel(nl.reciprocal), np.array([[1e-20, -2.0]], dtype=np.float32))


# ---------------------------------------------------------------- accumulator registers


def test_accumulator_chain_across_instructions(rng):
    """reset_reduce, reduce, a read-out with idle, a reset, activation_reduce: one register
    file, persistent in program order."""

    def kernel(x1, x2):
        a, b = load(x1), load(x2)
        o = nl.ndarray(x1.shape, nl.float32, buffer=nl.sbuf)
        r1 = nl.ndarray((P, 1), nl.float32, buffer=nl.sbuf)
        r2 = nl.ndarray((P, 1), nl.float32, buffer=nl.sbuf)
        r3 = nl.ndarray((P, 1), nl.float32, buffer=nl.sbuf)
        r4 = nl.ndarray((P, 1), nl.float32, buffer=nl.sbuf)
        nisa.activation(o, nl.exp, a, reduce_op=nl.add, reduce_cmd=nisa.reduce_cmd.reset_reduce)
        nisa.activation(o, nl.exp, b, reduce_op=nl.add, reduce_cmd=nisa.reduce_cmd.reduce)
        nisa.activation(o, nl.copy, a, reduce_res=r1)  # idle: read out only
        nisa.activation(o, nl.copy, a, reduce_cmd=nisa.reduce_cmd.reset, reduce_res=r2)
        nisa.activation(
            o, nl.square, b, reduce_op=np.add, reduce_cmd=nisa.reduce_cmd.reduce, reduce_res=r3
        )
        nisa.activation_reduce(o, nl.tanh, a, reduce_op=nl.add, reduce_res=r4)
        return store(r1), store(r2), store(r3), store(r4)

    x1 = rng.standard_normal((P, F)).astype(np.float32)
    x2 = rng.standard_normal((P, F)).astype(np.float32)
    r1, r2, r3, r4 = run(kernel, x1, x2)

    def rowsum(y):
        return y.astype(np.float32).astype(np.float64).sum(axis=1, keepdims=True).astype(np.float32)

    e1, e2 = np.exp(x1.astype(np.float64)), np.exp(x2.astype(np.float64))
    np.testing.assert_allclose(r1, rowsum(e1) + rowsum(e2), rtol=2e-7)
    np.testing.assert_array_equal(r2, np.zeros((P, 1), np.float32))
    np.testing.assert_allclose(r3, rowsum(x2.astype(np.float64) ** 2), rtol=2e-7)
    np.testing.assert_allclose(r4, rowsum(np.tanh(x1.astype(np.float64))), rtol=2e-7, atol=1e-6)


def test_accumulator_lanes_follow_the_data_partitions(rng):
    def kernel(x):
        a = load(x)
        o = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        r = nl.ndarray((P, 1), nl.float32, buffer=nl.sbuf)
        nisa.activation(o, nl.copy, a, reduce_op=nl.add, reduce_cmd=nisa.reduce_cmd.reset_reduce)
        nisa.activation(
            o[32:64], nl.copy, a[32:64], reduce_op=nl.add, reduce_cmd=nisa.reduce_cmd.reduce
        )
        nisa.activation(o, nl.copy, a, reduce_res=r)
        return store(r)

    x = rng.integers(-8, 8, (P, 16)).astype(np.float32)
    want = x.sum(axis=1, keepdims=True)
    want[32:64] *= 2
    np.testing.assert_array_equal(run(kernel, x), want)


def test_idle_with_reduce_op_warns_that_nothing_accumulates(rng):
    x = rng.standard_normal((P, 4)).astype(np.float32)
    with pytest.warns(SimulationWarning, match="reduce_cmd=idle leaves the accumulators"):
        run(act_kernel(nl.exp, reduce_op=nl.add), x)


# ---------------------------------------------------------------- activate2


def a2_kernel(op, imm0, imm1, op0, op1, out_dtype=nl.float32, tensor_imms=False, **kw):
    def kernel(x, i0, i1):
        xt = load(x)
        v0, v1 = (load(i0), load(i1)) if tensor_imms else (imm0, imm1)
        out = nl.ndarray(x.shape, out_dtype, buffer=nl.sbuf)
        r = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
        nisa.activate2(
            dst=out, op=op, data=xt, imm0=v0, imm1=v1, op0=op0, op1=op1, reduce_res=r, **kw
        )
        return store(out), store(r)

    return kernel


@pytest.mark.parametrize(
    ("op0", "op1", "rev0", "rev1", "fn"),
    [
        ("multiply", "add", False, False, lambda x, a, b: x * a + b),
        ("multiply", "subtract", False, True, lambda x, a, b: b - x * a),
        ("multiply", "bypass", False, False, lambda x, a, b: x * a),
        ("add", "bypass", False, False, lambda x, a, b: x + a),
        ("subtract", "bypass", True, False, lambda x, a, b: a - x),
        ("bypass", "bypass", False, False, lambda x, a, b: x),
    ],
)
@pytest.mark.parametrize("tensor_imms", [False, True], ids=["scalar", "vector"])
def test_activate2_stages(rng, op0, op1, rev0, rev1, fn, tensor_imms):
    x = rng.standard_normal((P, F)).astype(np.float32)
    i0 = rng.uniform(0.5, 2, (P, 1)).astype(np.float32)
    i1 = rng.standard_normal((P, 1)).astype(np.float32)
    a, b = (i0, i1) if tensor_imms else (np.float32(1.25), np.float32(-0.5))
    k = a2_kernel(
        nl.gelu,
        float(a) if not tensor_imms else None,
        float(b) if not tensor_imms else None,
        getattr(nl, op0),
        getattr(nl, op1),
        tensor_imms=tensor_imms,
        reverse0=rev0,
        reverse1=rev1,
    )
    out, _ = run(k, x, i0, i1)
    pre = fn(x, a, b).astype(np.float32)  # each stage in fp32
    np.testing.assert_allclose(out, _gelu(pre.astype(np.float64)), rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("relu_vector", [False, True])
def test_activate2_prelu_uses_relu_param(rng, relu_vector):
    def kernel(x, alpha):
        xt = load(x)
        al = load(alpha) if relu_vector else 0.1
        out = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.activate2(out, nl.prelu, xt, None, None, nl.bypass, nl.bypass, relu_param=al)
        return store(out)

    x = rng.standard_normal((P, F)).astype(np.float32)
    alpha = rng.uniform(0, 0.5, (P, 1)).astype(np.float32) if relu_vector else np.float32(0.1)
    want = np.where(x >= 0, x, alpha * x)
    np.testing.assert_allclose(
        run(kernel, x, np.broadcast_to(alpha, (P, 1)).copy()), want, rtol=1.2e-7
    )


@pytest.mark.parametrize(
    ("rop", "ref"),
    [
        ("maximum", lambda y: y.max(axis=1)),
        ("minimum", lambda y: y.min(axis=1)),
        ("abs_max", lambda y: y[np.arange(len(y)), np.abs(y).argmax(axis=1)]),
        ("abs_min", lambda y: y[np.arange(len(y)), np.abs(y).argmin(axis=1)]),
        ("add", lambda y: y.astype(np.float64).sum(axis=1)),
    ],
)
def test_activate2_reductions(rng, rop, ref):
    x = rng.standard_normal((P, F)).astype(np.float32)
    k = a2_kernel(
        nl.copy,
        2.0,
        None,
        nl.multiply,
        None,
        reduce_op=getattr(nl, rop),
        reduce_cmd=nisa.reduce_cmd.reset_reduce,
    )
    out, r = run(k, x, x, x)
    y = (x * np.float32(2)).astype(np.float32)
    np.testing.assert_array_equal(out, y)
    np.testing.assert_allclose(r[:, 0], ref(y).astype(np.float32), rtol=2e-7)


def test_activate2_shares_registers_with_activation(rng):
    def kernel(x):
        a = load(x)
        o = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        r = nl.ndarray((P, 1), nl.float32, buffer=nl.sbuf)
        nisa.activation(o, nl.copy, a, reduce_op=nl.add, reduce_cmd=nisa.reduce_cmd.reset_reduce)
        nisa.activate2(
            o,
            nl.copy,
            a,
            1.0,
            None,
            nl.add,
            None,
            reduce_op=nl.add,
            reduce_cmd=nisa.reduce_cmd.reduce,
            reduce_res=r,
        )
        return store(r)

    x = rng.integers(-4, 4, (P, 8)).astype(np.float32)
    np.testing.assert_array_equal(run(kernel, x)[:, 0], 2 * x.sum(axis=1) + 8)


def test_activation_on_gpsimd_on_trn3(rng):
    x = rng.standard_normal((P, F)).astype(np.float32)
    out = run(act_kernel(nl.sigmoid, engine=nisa.engine.gpsimd), x)
    np.testing.assert_allclose(out, _sig(x.astype(np.float64)), rtol=1.2e-7)


# ---------------------------------------------------------------- errors


def _x(p=P, f=8, dtype=np.float32):
    return (np.zeros((p, f), dtype),)


def test_error_bias_with_free_size_above_one():
    def kernel(x):
        xt = load(x)
        out = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.activation(out, nl.exp, xt, bias=xt[:, 0:2])  # BAD

    expect_error(
        kernel,
        _x(),
        r"operand 'bias' must be a scalar or a \(P, 1\) tensor, got "
        r"shape \(128, 2\)",
    )


def test_error_scale_tensor_not_fp32():
    def kernel(x):
        xt = load(x)
        out = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.activation(out, nl.exp, xt, scale=xt[:, 0:1])  # BAD

    expect_error(
        kernel,
        _x(dtype=ml_dtypes.bfloat16),
        r"scale has dtype bfloat16; a scale "
        r"tensor must be float32",
    )


def test_error_bias_tfloat32():
    def kernel(x):
        xt = load(x)
        bt = nl.ndarray((P, 1), nl.tfloat32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=bt, src=xt[:, 0:1])
        out = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.activation(out, nl.exp, xt, bias=bt)  # BAD

    expect_error(kernel, _x(), r"bias has dtype tfloat32; any dtype but tfloat32")


def test_error_scalar_bias_on_trn1():
    def kernel(x):
        xt = load(x)
        out = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.activation(out, nl.exp, xt, bias=1.0)  # BAD

    expect_error(
        kernel,
        _x(),
        r"bias=1.0 is a scalar on trn1; NeuronCore-v2 takes a \(P, 1\) "
        r"bias tensor",
        chip="trn1",
    )


def test_error_reciprocal_with_bias_on_trn1():
    def kernel(x):
        xt = load(x)
        out = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.activation(out, nl.reciprocal, xt, bias=xt[:, 0:1])  # BAD

    expect_error(kernel, _x(), r"op=reciprocal with a bias on NeuronCore-v2", chip="trn1")


def test_error_activation_reduce_op_must_be_add():
    def kernel(x):
        xt = load(x)
        out = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.activation(  # BAD
            out, nl.exp, xt, reduce_op=nl.maximum, reduce_cmd=nisa.reduce_cmd.reduce
        )

    expect_error(kernel, _x(), r"reduce_op='maximum'; the Scalar Engine registers only sum")


def test_error_unknown_activation():
    def kernel(x):
        xt = load(x)
        out = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.activation(out, "cos", xt)  # BAD

    expect_error(
        kernel,
        _x(),
        r"op='cos' is not a Scalar Engine activation function "
        r"\(known: copy, bypass",
    )


def test_error_shapes_differ():
    def kernel(x):
        xt = load(x)
        out = nl.ndarray((P, 4), nl.float32, buffer=nl.sbuf)
        nisa.activation(out, nl.exp, xt)  # BAD

    expect_error(kernel, _x(), r"same elements per partition: got dst=4, data=8")


def test_error_reduce_res_shape():
    def kernel(x):
        xt = load(x)
        out = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(out, nl.exp, xt, reduce_op=nl.add, reduce_res=xt[:, 0:2])  # BAD

    expect_error(kernel, _x(), r"operand 'reduce_res' must be a scalar or a \(P, 1\) tensor")


def test_error_activation_reduce_needs_reduce_res():
    def kernel(x):
        xt = load(x)
        out = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(out, nl.exp, xt, reduce_op=nl.add, reduce_res=None)  # BAD

    expect_error(kernel, _x(), r"operand 'reduce_res' is required")


def test_error_load_reduce_is_not_simulated():
    def kernel(x):
        xt = load(x)
        out = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.activation(  # BAD
            out, nl.exp, xt, reduce_op=nl.add, reduce_cmd=nisa.reduce_cmd.load_reduce
        )

    expect_error(
        kernel,
        _x(),
        r"reduce_cmd=load_reduce is not simulated on the Scalar Engine",
        exc_type=UnsupportedError,
    )


def test_error_gpsimd_activation_before_trn3_and_with_reduce():
    def kernel(x):
        xt = load(x)
        out = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.activation(out, nl.exp, xt, engine=nisa.engine.gpsimd)  # BAD

    expect_error(kernel, _x(), r"GpSimd activations need NeuronCore-v4", chip="trn2")

    def reduce_kernel(x):
        xt = load(x)
        out = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.activation(  # BAD
            out, nl.exp, xt, reduce_cmd=nisa.reduce_cmd.reset, engine=nisa.engine.gpsimd
        )

    expect_error(reduce_kernel, _x(), r"the accumulator registers exist on the Scalar Engine")


def _a2_error(imm0, imm1, op0, op1, **kw):
    def kernel(x):
        xt = load(x)
        out = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.activate2(out, nl.exp, xt, imm0, imm1, op0, op1, **kw)  # BAD

    return kernel


def test_error_activate2_rules():
    expect_error(
        _a2_error(1.0, 1.0, nl.multiply, nl.add),
        _x(),
        r"activate2: not available on trn2",
        chip="trn2",
    )
    expect_error(
        _a2_error(1.0, 1.0, nl.add, nl.add),
        _x(),
        r"\(op0, op1\) = \('add', 'add'\); allowed: \(multiply, add\)",
    )
    expect_error(_a2_error(None, 1.0, None, nl.add), _x(), r"op1='add' without op0; op1 needs op0")
    expect_error(
        _a2_error(1.0, None, nl.multiply, nl.bypass, reverse1=True),
        _x(),
        r"reverse1=True with a bypassed stage",
    )
    expect_error(
        _a2_error(None, None, nl.multiply, None), _x(), r"imm0 is None but its op is multiply"
    )
    expect_error(
        _a2_error(1.0, None, nl.multiply, None, reduce_op=nl.multiply),
        _x(),
        r"reduce_op='multiply'; allowed: add, maximum, minimum, abs_max, abs_min",
    )


def test_error_activate2_tensor_immediates_share_a_dtype():
    def kernel(x, y):
        xt, yt = load(x), load(y)
        out = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.activate2(out, nl.exp, xt, xt[:, 0:1], yt, nl.multiply, nl.add)  # BAD

    expect_error(
        kernel,
        (np.zeros((P, 8), np.float32), np.zeros((P, 1), ml_dtypes.bfloat16)),
        r"imm0 is float32 and imm1 is bfloat16; tensor immediates must share a dtype",
    )
