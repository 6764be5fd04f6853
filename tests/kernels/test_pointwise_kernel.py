"""trnsim.kernels.pointwise: every op against its float64 reference (PyTorch CPU for special
values and integer semantics), over layouts (broadcast, strided, offset, in place), dtypes and
multi-tensor launches; rejections at the caller's line."""

from __future__ import annotations

import nki
import numpy as np
import pytest
import torch
from kernel_testing import BF16, Strided, assert_close, assert_rejected, program_of, run_views
from trnsim.kernels import pointwise as pw
from trnsim.kernels import pointwise_extra, pointwise_ops

pytestmark = pytest.mark.filterwarnings("error::trnsim.errors.SimulationWarning")
SHAPE = (5, 37)
SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], np.float32)


def run(op, *inputs, out_dtype=np.float32, shape=None, chip="trn3", **attrs):
    """out = pointwise(op, inputs) for contiguous numpy inputs (scalars in attrs)."""
    shape = shape or np.broadcast_shapes(*(np.shape(x) for x in inputs))
    out = np.zeros(shape, out_dtype)
    run_views(pw.pointwise, out, *inputs, chip=chip, op=op, **attrs)
    return out


def check(got, want, dtype="float32", factor=2.0):
    """assert_close on finite references; the non-finite ones must match exactly."""
    got = np.asarray(got, np.float64)
    want = np.broadcast_to(np.asarray(want, np.float64), got.shape)
    fin = np.isfinite(want)
    np.testing.assert_array_equal(np.isnan(got[~fin]), np.isnan(want[~fin]))
    np.testing.assert_array_equal(got[~fin & ~np.isnan(want)], want[~fin & ~np.isnan(want)])
    if fin.any():
        assert_close(got[fin], want[fin], dtype, factor)


def _with_specials(x):
    flat = x.reshape(-1).copy()
    flat[: len(SPECIALS)] = SPECIALS
    return flat.reshape(x.shape)


def _inputs(rng, kind):
    x = rng.standard_normal(SHAPE).astype(np.float32)
    return {
        "any": 3 * x,
        "pos": np.exp(4 * x).astype(np.float32),
        # 1e-30 .. 1e30, outside log's [2^-64, 2^64]; fp32 denormals (-> -inf) excluded
        "wide": np.maximum(np.exp(np.clip(40 * x, -87, 87)), 2.0**-126).astype(np.float32),
        "gt-1": (np.exp(3 * x) - 0.999).astype(np.float32),
        "exp": 10 * x,
        "trig": (x * 10.0 ** rng.integers(-2, 5, SHAPE)).astype(np.float32),
        "round": np.concatenate([np.arange(-9.5, 9.5, 0.5), 3e9 * x.reshape(-1)])[: x.size]
        .reshape(SHAPE)
        .astype(np.float32),
    }[kind]


# op -> (input kind, with special values, tolerance factor, attrs)
UNARY = {
    "neg": ("any", True, 1, {}),
    "abs": ("any", True, 1, {}),
    "sign": ("any", True, 1, {}),
    "exp": ("exp", True, 2, {}),
    "exp2": ("exp", True, 8, {}),
    "expm1": ("exp", True, 4, {}),
    "log": ("wide", True, 2, {}),
    "log2": ("wide", True, 2, {}),
    "log10": ("wide", True, 2, {}),
    "log1p": ("gt-1", True, 4, {}),
    "sqrt": ("pos", True, 2, {}),
    "rsqrt": ("pos", True, 2, {}),
    "reciprocal": ("any", True, 2, {}),
    "sigmoid": ("any", False, 2, {}),
    "tanh": ("any", True, 2, {}),
    "relu": ("any", True, 1, {}),
    "gelu": ("any", False, 2, {}),
    "silu": ("any", False, 2, {}),
    "mish": ("any", False, 2, {}),
    "softplus": ("any", False, 2, {"beta": 2.0, "threshold": 3.0}),
    "elu": ("any", False, 4, {"alpha": 0.7}),
    "leaky_relu": ("any", True, 1, {"negative_slope": 0.2}),
    "hardtanh": ("any", True, 1, {"min_val": -2.0, "max_val": 1.5}),
    "hardsigmoid": ("any", False, 2, {}),
    "hardswish": ("any", False, 2, {}),
    "sin": ("trig", True, 4, {}),
    "cos": ("trig", True, 4, {}),
    "erf": ("any", False, 2, {}),
    "floor": ("round", True, 1, {}),
    "ceil": ("round", True, 1, {}),
    "round": ("round", True, 1, {}),
    "trunc": ("round", True, 1, {}),
    "frac": ("round", True, 1, {}),
    "square": ("any", True, 1, {}),
    "nan_to_num": ("any", True, 1, {"nan": 1.5}),
}


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_op_matches_reference(rng, op):
    kind, specials, factor, attrs = UNARY[op]
    x = _inputs(rng, kind)
    if specials:
        x = _with_specials(x)
    got = run(op, x, **attrs)
    check(got, pw.pointwise_ref(op, x, **attrs), factor=factor)


@pytest.mark.parametrize(
    ("op", "fn", "attrs"),
    [
        ("sign", torch.sign, {}),
        ("log", torch.log, {}),
        ("log1p", torch.log1p, {}),
        ("rsqrt", torch.rsqrt, {}),
        ("round", torch.round, {}),
        ("frac", torch.frac, {}),
        ("nan_to_num", torch.nan_to_num, {}),
        ("sqrt", torch.sqrt, {}),
        ("trunc", torch.trunc, {}),
        ("sin", torch.sin, {}),
        ("expm1", torch.expm1, {}),
    ],
)
def test_special_values_match_torch(op, fn, attrs):
    x = np.array(
        [0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, 1e-30, 3e38, 2.5, -2.5, 1e-44], np.float32
    )
    if op == "sin":
        x[7] = 3e4  # beyond 2^22 * 2pi the range reduction is meaningless (documented)
    if op == "log":
        x[10] = 2.0**-126  # fp32 denormals give -inf (documented)
    got = run(op, x, **attrs)
    want = fn(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-38, equal_nan=True)


def test_gelu_tanh_and_predicates(rng):
    x = _with_specials(_inputs(rng, "any"))
    check(
        run("gelu", np.nan_to_num(x), approximate="tanh"),
        pw.pointwise_ref("gelu", np.nan_to_num(x), approximate="tanh"),
    )
    for op in ("isnan", "isinf", "isfinite", "logical_not"):
        got = run(op, x, out_dtype=np.bool_)
        np.testing.assert_array_equal(got, pw.pointwise_ref(op, x), err_msg=op)


def test_clamp_scalars_and_tensors(rng):
    x = _with_specials(_inputs(rng, "any"))
    lo = rng.standard_normal(SHAPE[1]).astype(np.float32) - 1
    check(run("clamp", x, min=-1.0, max=None), np.maximum(x.astype(np.float64), -1.0))
    check(run("clamp", x, max=0.5), pw.pointwise_ref("clamp", x, max=0.5))
    check(
        run("clamp", x, lo, max=2.0),
        torch.clamp(torch.from_numpy(x), torch.from_numpy(lo), torch.tensor(2.0)).numpy(),
    )


# ---------------------------------------------------------------- binary and ternary


def _binary_inputs(rng, op):
    a = (3 * rng.standard_normal(SHAPE)).astype(np.float32)
    b = (3 * rng.standard_normal(SHAPE)).astype(np.float32)
    if op in ("div", "remainder", "fmod"):
        b = np.where(np.abs(b) < 0.3, 0.7, b).astype(np.float32)
    if op == "pow":
        a = np.abs(a) + 0.1
    if op in ("eq", "ne", "le", "ge", "lt", "gt", "maximum", "minimum"):
        b[:, ::3] = a[:, ::3]
    if op.startswith("logical"):
        a[:, ::2] = 0
        b[::2] = 0
    return a, b


BINARY = [
    "add",
    "sub",
    "rsub",
    "mul",
    "div",
    "remainder",
    "fmod",
    "pow",
    "maximum",
    "minimum",
    "atan2",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "logical_and",
    "logical_or",
    "logical_xor",
]
BOOL_OUT = {"eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor"}


@pytest.mark.parametrize("op", BINARY)
def test_binary_op_matches_reference(rng, op):
    a, b = _binary_inputs(rng, op)
    attrs = {"alpha": 0.5} if op in ("add", "sub", "rsub") else {}
    od = np.bool_ if op in BOOL_OUT else np.float32
    got = run(op, a, b, out_dtype=od, **attrs)
    want = pw.pointwise_ref(op, a, b, **attrs)
    if od is np.bool_:
        np.testing.assert_array_equal(got, want)
    else:
        check(got, want, factor=4)


@pytest.mark.parametrize(
    ("op", "attrs"),
    [
        ("add", {"other": 2.5, "alpha": 2}),
        ("sub", {"other": 1.25}),
        ("rsub", {"other": 3.0}),
        ("mul", {"other": -0.5}),
        ("div", {"other": 4.0}),
        ("pow", {"exponent": 3.0}),
        ("pow", {"input": 2.0}),
        ("remainder", {"other": 1.5}),
        ("gt", {"other": 0.0}),
        ("maximum", {"other": 0.1}),
        ("div", {"other": 3.0, "rounding_mode": "floor"}),
    ],
)
def test_tensor_scalar_forms(rng, op, attrs):
    a = (3 * rng.standard_normal(SHAPE)).astype(np.float32)
    if op == "pow" and "exponent" in attrs:
        a = np.abs(a)
    od = np.bool_ if op == "gt" else np.float32
    got = run(op, a, out_dtype=od, **attrs)
    want = pw.pointwise_ref(op, a, **attrs)
    if od is np.bool_:
        np.testing.assert_array_equal(got, want)
    else:
        check(got, want, factor=4)


@pytest.mark.parametrize("mode", ["trunc", "floor"])
def test_div_rounding_modes_float(rng, mode):
    a = (10 * rng.standard_normal(SHAPE)).astype(np.float32)
    b = np.where(rng.random(SHAPE) < 0.5, -1.0, 1.0).astype(np.float32) * rng.integers(1, 9, SHAPE)
    a[0, :8] = [7.0, -7.0, 6.0, -6.0, 9.0, 0.0, 1.0, -1.0]
    got = run("div", a, b.astype(np.float32), rounding_mode=mode)
    want = torch.div(
        torch.from_numpy(a), torch.from_numpy(b.astype(np.float32)), rounding_mode=mode
    ).numpy()
    np.testing.assert_array_equal(got, want)


def test_atan2_signed_zeros_and_infinities():
    y = np.array(
        [0.0, -0.0, 0.0, -0.0, np.inf, np.inf, -np.inf, 1.0, -1.0, np.nan, 3.0, -2.0], np.float32
    )
    x = np.array(
        [0.0, 0.0, -0.0, -0.0, np.inf, -np.inf, 1.0, -np.inf, -np.inf, 1.0, -4.0, 0.5], np.float32
    )
    got = run("atan2", y, x)
    want = torch.atan2(torch.from_numpy(y), torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, equal_nan=True)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_where_masked_fill_and_fused(rng):
    a, b = _binary_inputs(rng, "add")
    c = rng.random(SHAPE) < 0.5
    np.testing.assert_array_equal(run("where", c, a, b), np.where(c, a, b))
    np.testing.assert_array_equal(run("where", c, a, other=0.25), np.where(c, a, np.float32(0.25)))
    np.testing.assert_array_equal(run("where", c, b, input=-1.0), np.where(c, np.float32(-1), b))
    m = rng.random(SHAPE[1]) < 0.3  # broadcast mask
    np.testing.assert_array_equal(run("masked_fill", a, m, value=-2.0), np.where(m, -2.0, a))
    t1, t2 = _binary_inputs(rng, "div")
    for op in ("addcmul", "addcdiv"):
        check(run(op, a, t1, t2, value=0.5), pw.pointwise_ref(op, a, t1, t2, value=0.5))
    w = rng.random(SHAPE).astype(np.float32)
    check(run("lerp", a, b, w), pw.pointwise_ref("lerp", a, b, w))
    for wt in (0.25, 0.75):
        want = torch.lerp(torch.from_numpy(a), torch.from_numpy(b), wt).numpy()
        check(run("lerp", a, b, weight=wt), want, factor=1)


BACKWARD = {
    "threshold_backward": {"threshold": 0.5},
    "gelu_backward": {},
    "silu_backward": {},
    "leaky_relu_backward": {"negative_slope": 0.1},
    "hardtanh_backward": {"min_val": -1.0, "max_val": 2.0},
    "softplus_backward": {"beta": 1.5, "threshold": 2.0},
    "mish_backward": {},
    "sigmoid_backward": {},
    "tanh_backward": {},
}


@pytest.mark.parametrize("op", sorted(BACKWARD))
def test_backward_op_matches_reference(rng, op):
    g = rng.standard_normal(SHAPE).astype(np.float32)
    x = (2 * rng.standard_normal(SHAPE)).astype(np.float32)
    if op in ("sigmoid_backward", "tanh_backward"):
        x = np.tanh(x)
    check(run(op, g, x, **BACKWARD[op]), pw.pointwise_ref(op, g, x, **BACKWARD[op]), factor=4)


def test_backward_variants(rng):
    g = rng.standard_normal(SHAPE).astype(np.float32)
    x = (2 * rng.standard_normal(SHAPE)).astype(np.float32)
    check(
        run("gelu_backward", g, x, approximate="tanh"),
        pw.pointwise_ref("gelu_backward", g, x, approximate="tanh"),
        factor=4,
    )
    for is_result in (False, True):
        attrs = {"alpha": 0.5, "scale": 1.5, "input_scale": 0.8, "is_result": is_result}
        check(
            run("elu_backward", g, x, **attrs),
            pw.pointwise_ref("elu_backward", g, x, **attrs),
            factor=4,
        )
    gi = g.copy()
    gi[0, :3] = [np.inf, np.nan, -np.inf]
    xi = x.copy()
    xi[0, :3] = -1.0  # masked out: PyTorch gives 0, not nan
    np.testing.assert_array_equal(run("threshold_backward", gi, xi, threshold=0.0)[0, :3], 0.0)
    mask = rng.random(SHAPE) < 0.8
    check(run("dropout", x, mask, scale=1.25), x * mask * 1.25)


# ---------------------------------------------------------------- dtypes


@pytest.mark.parametrize("dtype", [BF16, np.float16])
@pytest.mark.parametrize("op", ["add", "mul", "exp", "log", "sin", "floor", "gelu", "div"])
def test_16bit_floats(rng, dtype, op):
    a, b = _binary_inputs(rng, "div")
    a = np.abs(a) if op == "log" else a
    ins = (a.astype(dtype), b.astype(dtype)) if op in ("add", "mul", "div") else (a.astype(dtype),)
    got = run(op, *ins, out_dtype=dtype)
    want = pw.pointwise_ref(op, *(x.astype(np.float32) for x in ins))
    check(got, want, np.dtype(dtype).name, factor=2)


def test_16bit_add_scalars_round_like_torch(rng):
    """PyTorch converts add/sub's alpha and scalar operand to a bf16/fp16 tensor's dtype."""
    a = rng.standard_normal(4096).astype(BF16)
    b = rng.standard_normal(4096).astype(BF16)
    ta, tb = (torch.from_numpy(x.astype(np.float32)).bfloat16() for x in (a, b))
    got = run("add", a, b, out_dtype=BF16, alpha=0.1)
    np.testing.assert_array_equal(got, torch.add(ta, tb, alpha=0.1).float().numpy().astype(BF16))
    got = run("sub", a, out_dtype=BF16, other=0.3)
    np.testing.assert_array_equal(got, ta.sub(0.3).float().numpy().astype(BF16))


def test_mixed_dtypes_cast_on_the_way_out(rng):
    a = rng.standard_normal(SHAPE).astype(BF16)
    b = rng.integers(-5, 5, SHAPE).astype(np.int32)
    got = run("mul", a, b, out_dtype=np.float32)
    check(got, a.astype(np.float64) * b, factor=1)


INT_CASES = [
    ("add", {"alpha": 3}),
    ("sub", {}),
    ("rsub", {"alpha": 2}),
    ("mul", {}),
    ("maximum", {}),
    ("minimum", {}),
    ("bitwise_and", {}),
    ("bitwise_or", {}),
    ("bitwise_xor", {}),
    ("div", {"rounding_mode": "floor"}),
    ("div", {"rounding_mode": "trunc"}),
    ("remainder", {}),
    ("fmod", {}),
]


def _torch_int(op, a, b, attrs):
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    fn = {
        "add": torch.add,
        "sub": torch.sub,
        "rsub": torch.rsub,
        "mul": torch.mul,
        "maximum": torch.maximum,
        "minimum": torch.minimum,
        "bitwise_and": torch.bitwise_and,
        "bitwise_or": torch.bitwise_or,
        "bitwise_xor": torch.bitwise_xor,
        "div": torch.div,
        "remainder": torch.remainder,
        "fmod": torch.fmod,
    }[op]
    return fn(ta, tb, **attrs).numpy()


@pytest.mark.parametrize(("op", "attrs"), INT_CASES)
def test_int32_ops_exact(rng, op, attrs):
    a = rng.integers(-(2**31), 2**31, SHAPE, dtype=np.int64).astype(np.int32)
    b = rng.integers(-(2**31), 2**31, SHAPE, dtype=np.int64).astype(np.int32)
    if op in ("div", "remainder", "fmod"):
        b = np.where(rng.random(SHAPE) < 0.5, rng.integers(-300, 300, SHAPE), b).astype(np.int32)
        b[b == 0] = 7
        a[0, :6], b[0, :6] = [7, -7, 7, -7, 0, 2**31 - 1], [2, 2, -2, -2, 3, 1]
    got = run(op, a, b, out_dtype=np.int32, **attrs)
    np.testing.assert_array_equal(got, _torch_int(op, a, b, attrs))


def test_int32_unary_scalar_and_compare(rng):
    a = rng.integers(-(2**31), 2**31, SHAPE, dtype=np.int64).astype(np.int32)
    b = a.copy()
    b[:, ::2] += 1  # differs by one near 2^31: fp32 comparisons could not tell
    ta = torch.from_numpy(a)
    for op, fn in (
        ("neg", torch.neg),
        ("abs", torch.abs),
        ("sign", torch.sign),
        ("bitwise_not", torch.bitwise_not),
        ("square", torch.square),
    ):
        np.testing.assert_array_equal(run(op, a, out_dtype=np.int32), fn(ta).numpy(), op)
    for op in ("eq", "lt", "ge"):
        got = run(op, a, b, out_dtype=np.bool_)
        np.testing.assert_array_equal(got, pw.pointwise_ref(op, a.astype(np.int64), b), op)
    np.testing.assert_array_equal(run("add", a, out_dtype=np.int32, other=5), (ta + 5).numpy())
    np.testing.assert_array_equal(
        run("clamp", a, out_dtype=np.int32, min=-1000, max=2**30),
        torch.clamp(ta, -1000, 2**30).numpy(),
    )
    np.testing.assert_array_equal(run("gt", a, out_dtype=np.bool_, other=2**30 + 1), a > 2**30 + 1)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16])
def test_narrow_ints_wrap_like_torch(rng, dtype):
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max + 1, SHAPE).astype(dtype)
    b = rng.integers(info.min, info.max + 1, SHAPE).astype(dtype)
    for op in ("add", "mul", "sub"):
        got = run(op, a, b, out_dtype=dtype)
        np.testing.assert_array_equal(got, _torch_int(op, a, b, {}), op)


def test_bool_ops():
    a = np.array([True, False, True, False])
    b = np.array([True, True, False, False])
    np.testing.assert_array_equal(run("bitwise_and", a, b, out_dtype=np.bool_), a & b)
    np.testing.assert_array_equal(run("bitwise_xor", a, b, out_dtype=np.bool_), a ^ b)
    np.testing.assert_array_equal(run("bitwise_not", a, out_dtype=np.bool_), ~a)
    np.testing.assert_array_equal(run("logical_or", a, b, out_dtype=np.bool_), a | b)
    np.testing.assert_array_equal(
        run("where", a, b, other=True, out_dtype=np.bool_), np.where(a, b, True)
    )


def test_integer_edge_semantics(rng):
    a = rng.integers(-5, 6, (4, 5)).astype(np.int32)
    b = rng.integers(0, 4, (4, 5)).astype(np.int32)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    np.testing.assert_array_equal(run("pow", a, b, out_dtype=np.int32), torch.pow(ta, tb).numpy())
    np.testing.assert_array_equal(run("pow", a, out_dtype=np.int32, exponent=3), a**3)
    lo, hi = np.full(5, -2, np.int32), np.full((4, 1), 3, np.int32)
    np.testing.assert_array_equal(run("clamp", a, lo, hi, out_dtype=np.int32), np.clip(a, lo, hi))
    np.testing.assert_array_equal(run("relu", a, out_dtype=np.int32), np.maximum(a, 0))
    i8 = np.array([-128, -5, 0, 7], np.int8)
    for op in ("abs", "neg", "sign"):
        want = getattr(torch, op)(torch.from_numpy(i8)).numpy()
        np.testing.assert_array_equal(run(op, i8, out_dtype=np.int8), want, op)


def test_masks_and_tensor_fill_values(rng):
    a = rng.standard_normal((4, 5)).astype(np.float32)
    m = rng.random((4, 5)) < 0.5
    v = np.array([7.5], np.float32)  # masked_fill.Tensor: a 0-d value as shape (1,)
    np.testing.assert_array_equal(run("masked_fill", a, m, v), np.where(m, 7.5, a))
    m8 = m.astype(np.uint8)  # a byte mask works as a predicate too
    np.testing.assert_array_equal(run("where", m8, a, other=1.0), np.where(m8, a, 1.0))
    x = np.array([np.nan, np.inf, -np.inf, 1.5], np.float32).astype(BF16)
    want = torch.nan_to_num(torch.from_numpy(x.astype(np.float32)).bfloat16())
    np.testing.assert_array_equal(
        run("nan_to_num", x, out_dtype=BF16).astype(np.float32), want.float().numpy()
    )


def pairs(a):
    """An int64 array as its int32 pair view (shape S + (2,))."""
    a = np.ascontiguousarray(a, np.int64)
    return a.view(np.int32).reshape((*a.shape, 2))


def unpairs(p):
    return np.ascontiguousarray(p).view(np.int64).reshape(p.shape[:-1])


def test_int32_scalars_on_multi_dim_tiles(rng):
    a = rng.integers(-(2**31), 2**31, (3, 4, 5), dtype=np.int64).astype(np.int32)
    view = Strided(np.ascontiguousarray(a.transpose(2, 0, 1)), (3, 4, 5), (4, 1, 12))
    got = run_views(pw.pointwise, np.zeros((3, 4, 5), np.int32), view, op="mul", other=-7)[0]
    np.testing.assert_array_equal(got, (torch.from_numpy(a) * -7).numpy())


def test_int64_pair_views_broadcast_where_and_scalars(rng):
    a = rng.integers(-(2**31), 2**31, (4, 6), dtype=np.int64)
    row = rng.integers(-(2**20), 2**20, 6, dtype=np.int64)
    c = rng.random((4, 6)) < 0.5
    out = np.zeros((4, 6, 2), np.int32)
    run_views(pw.pointwise, out, c, pairs(a), pairs(row), op="where", int64=[0, 2, 3])
    np.testing.assert_array_equal(unpairs(out), np.where(c, a, row))
    ge = np.zeros((4, 6), np.bool_)
    run_views(pw.pointwise, ge, pairs(a), op="ge", other=2**30, int64=[1])
    np.testing.assert_array_equal(ge, a >= 2**30)
    small = rng.integers(-(2**15), 2**15, (4, 6), dtype=np.int64)
    s2 = np.zeros((4, 6, 2), np.int32)
    run_views(pw.pointwise, s2, pairs(small), pairs(row), op="add", alpha=3, int64=[0, 1, 2])
    np.testing.assert_array_equal(unpairs(s2), small + 3 * row)


def test_int64_pair_views(rng):
    a = rng.integers(-(2**31), 2**31, SHAPE, dtype=np.int64)
    b = rng.integers(-(2**20), 2**20, SHAPE, dtype=np.int64)
    out = np.full((*SHAPE, 2), 99, np.int32)
    run_views(pw.pointwise, out, pairs(a), pairs(b), op="sub", int64=(0, 1, 2))
    want = np.clip(a - b, -(2**31), 2**31 - 1)  # inputs chosen so most stay in int32 range
    ok = (a - b >= -(2**31)) & (a - b < 2**31)
    np.testing.assert_array_equal(unpairs(out)[ok], want[ok])
    lt = np.zeros(SHAPE, np.bool_)
    run_views(pw.pointwise, lt, pairs(a), pairs(b), op="lt", int64=("input", "other"))
    np.testing.assert_array_equal(lt, a < b)
    m = np.zeros((*SHAPE, 2), np.int32)
    run_views(pw.pointwise, m, pairs(b), op="mul", other=-3, int64=["out", "input"])
    np.testing.assert_array_equal(unpairs(m), b * -3)
    f = np.zeros(SHAPE, np.float32)
    run_views(pw.pointwise, f, pairs(b), op="mul", other=0.5, int64=[1])
    np.testing.assert_array_equal(f, (b * 0.5).astype(np.float32))


# ---------------------------------------------------------------- copies and casts


CASTS = [
    (np.float32, BF16),
    (BF16, np.float16),
    (np.float32, np.int32),
    (np.float32, np.int8),
    (np.float32, np.bool_),
    (np.int32, np.float32),
    (np.int32, np.int8),
    (np.int8, np.uint8),
    (np.uint8, np.int32),
    (np.bool_, np.float32),
    (np.int32, np.bool_),
    (BF16, np.int32),
    (np.int16, np.int32),
    (np.int32, np.int16),
]


@pytest.mark.parametrize(("src", "dst"), CASTS, ids=lambda d: np.dtype(d).name)
def test_copy_casts_like_torch(rng, src, dst):
    x = (rng.standard_normal((6, 9)) * 200).astype(np.float32)
    x[0, :4] = [2.7, -2.7, 0.5, -0.0]
    xs = x.astype(src) if np.dtype(src).kind != "b" else x > 0
    got = run("copy", xs, out_dtype=dst)
    t = torch.from_numpy(xs.astype(np.float32) if src is BF16 else xs)
    if src is BF16:
        t = t.to(torch.bfloat16)
    tdst = {np.dtype(BF16): torch.bfloat16}.get(np.dtype(dst))
    want = t.to(tdst or torch.from_numpy(np.zeros(1, dst)).dtype)
    want = want.float().numpy().astype(dst) if tdst else want.numpy()
    np.testing.assert_array_equal(got, want)


def test_copy_of_views(rng):
    """.contiguous() of transposed, offset and expanded (stride-0) views; a strided output."""
    base = rng.standard_normal(500).astype(np.float32)
    for view in (Strided(base, (12, 30), (1, 12), offset=3), Strided(base, (7, 40), (0, 1), 9)):
        got = run_views(pw.pointwise, np.zeros(view.shape, BF16), view, op="copy")[0]
        np.testing.assert_array_equal(got, view.expected().astype(BF16))
    out = np.zeros(900, np.float32)
    dst = Strided(out, (12, 30), (60, 2), offset=1)
    got = run_views(pw.pointwise, dst, Strided(base, (12, 30), (1, 12), offset=3), op="copy")[0]
    np.testing.assert_array_equal(
        Strided(got, dst.shape, dst.strides, 1).expected(),
        Strided(base, (12, 30), (1, 12), offset=3).expected(),
    )


def test_copy_int64_pairs(rng):
    a = rng.integers(-(2**31), 2**31, (4, 7), dtype=np.int64)
    a[0, :3] = [0, -1, 1]
    src = pairs(a)
    for dst, want in (
        (np.int32, a.astype(np.int32)),
        (np.float32, a.astype(np.float32)),
        (np.bool_, a != 0),
        (np.int8, a.astype(np.int8)),
    ):
        out = np.zeros((4, 7), dst)
        run_views(pw.pointwise, out, src, op="copy", int64=[1])
        np.testing.assert_array_equal(out, want, np.dtype(dst).name)
    t = np.zeros((7, 4, 2), np.int32)  # a transposed int64 copy: both words move together
    run_views(pw.pointwise, Strided(t, (4, 7, 2), (2, 8, 1)), src, op="copy", int64=[0, 1])
    np.testing.assert_array_equal(unpairs(t), a.T)
    x = np.array([[2.7, -2.7, 3e9, -1.0]], np.float32)
    o = np.zeros((1, 4, 2), np.int32)
    run_views(pw.pointwise, o, x, op="copy", int64=[0])
    np.testing.assert_array_equal(unpairs(o), [[2, -2, 2**31 - 1, -1]])
    i = np.array([-5, 0, 2**31 - 1], np.int32)
    o = np.zeros((3, 2), np.int32)
    run_views(pw.pointwise, o, i, op="copy", int64=[0])
    np.testing.assert_array_equal(unpairs(o), i.astype(np.int64))


# ---------------------------------------------------------------- layouts


@pytest.mark.parametrize(
    "shape", [(1,), (127,), (129,), (1000,), (3, 5, 7), (4, 4), (2, 3, 129, 5)]
)
def test_ragged_shapes(rng, shape):
    a = rng.standard_normal(shape).astype(np.float32)
    b = rng.standard_normal(shape).astype(np.float32)
    np.testing.assert_array_equal(run("add", a, b), a + b)
    check(run("exp", a), np.exp(a.astype(np.float64)))


def test_strided_offset_and_broadcast_views(rng):
    base = rng.standard_normal(2000).astype(np.float32)
    x = Strided(base, (30, 20), (1, 40), offset=7)  # a transposed, offset view
    bias = Strided(base, (30, 20), (0, 3), offset=11)  # stride-0 rows: a broadcast bias
    col = Strided(base, (30, 20), (2, 0), offset=1)  # stride-0 columns
    out_base = np.full(3000, -1.0, np.float32)
    out = Strided(out_base, (30, 20), (50, 2), offset=5)  # strided output
    got = run_views(pw.pointwise, out, x, bias, col, op="addcmul", value=2.0)[0]
    want = x.expected() + 2.0 * bias.expected() * col.expected()
    res = Strided(got, out.shape, out.strides, out.offset).expected()
    check(res, want, factor=2)
    untouched = np.ones(3000, bool)
    idx = 5 + 50 * np.arange(30)[:, None] + 2 * np.arange(20)[None, :]
    untouched[idx.reshape(-1)] = False
    assert (got[untouched] == -1.0).all()


def test_broadcast_numpy_rules(rng):
    a = rng.standard_normal((4, 1, 6)).astype(np.float32)
    b = rng.standard_normal((5, 1)).astype(np.float32)
    np.testing.assert_array_equal(run("mul", a, b, shape=(4, 5, 6)), a * b)
    s = np.array([3.0], np.float32)  # a 0-d tensor as shape (1,)
    np.testing.assert_array_equal(run("sub", a, s, shape=(4, 1, 6)), a - s)


def _mul_in_place(a, b):
    pw.pointwise(a, a, b, op="mul")  # one HBM tensor as out and input


def _tanh_in_place(base):
    view = base.ap([[20, 10], [1, 10]], offset=3)
    pw.pointwise(view, view, op="tanh")


def test_in_place(rng):
    a = rng.standard_normal((300, 70)).astype(np.float32)
    b = rng.standard_normal((300, 70)).astype(np.float32)
    want = a * b
    nki.simulate(_mul_in_place)(a, b)
    np.testing.assert_array_equal(a, want)
    v = rng.standard_normal(200).astype(np.float32)
    view = Strided(v, (10, 10), (20, 1), offset=3)
    want = np.tanh(view.expected().astype(np.float64))
    nki.simulate(_tanh_in_place)(v)
    check(Strided(v, view.shape, view.strides, view.offset).expected(), want)


def test_multi_tile_prefetch_and_engines(rng):
    n = 128 * 4096 * 2 + 77
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    np.testing.assert_array_equal(run("add", a, b), a + b)
    prog = program_of(pw.pointwise, np.zeros(n, np.float32), a, b, op="add")
    ops = [i.opcode for i in prog]
    assert ops[:5] == ["dma_copy"] * 4 + ["tensor_tensor"]  # tile 1's loads before tile 0's add
    assert {i.engine for i in prog if i.opcode == "tensor_tensor"} == {"vector", "gpsimd"}
    assert len(prog) == 4 * 3  # three tiles: two loads, one add, one store each
    sbuf = [o for i in prog if i.opcode == "dma_copy" for o in i.operands if o.partitions > 1]
    full = [o for o in sbuf if o.partitions == 128]  # all but the 77-element tail tile
    assert len(full) == len(sbuf) - 3
    assert min(o.nbytes // o.partitions for o in full) >= 2048  # >= 2 KiB per partition


@pytest.mark.parametrize("chip", ["trn1", "trn2"])
def test_other_chips(rng, chip):
    """NeuronCore-v2 (no ScalarE tensor_copy, tile-only activation biases) and v3."""
    for op, kind in (
        ("log", "wide"),
        ("exp", "exp"),
        ("hardswish", "any"),
        ("cos", "trig"),
        ("floor", "round"),
        ("elu", "any"),
    ):
        x = _inputs(rng, kind)
        check(run(op, x, chip=chip), pw.pointwise_ref(op, x), factor=4)
    a = rng.integers(-1000, 1000, SHAPE).astype(np.int32)
    b = rng.integers(1, 50, SHAPE).astype(np.int32)
    got = run("div", a, b, out_dtype=np.int32, chip=chip, rounding_mode="floor")
    np.testing.assert_array_equal(got, a // b)
    np.testing.assert_array_equal(run("copy", a, out_dtype=np.int8, chip=chip), a.astype(np.int8))


def test_tiny_launches_issue_few_instructions():
    x = np.ones((4, 4), np.float32)
    assert len(program_of(pw.pointwise, x.copy(), x, x, op="add")) == 4
    assert len(program_of(pw.pointwise, x.copy(), x, op="mul", other=2.0)) == 3
    assert len(program_of(pw.pointwise, x.copy(), x, op="copy")) == 1  # one HBM->HBM DMA


def test_bias_loaded_once(rng):
    a = rng.standard_normal((512, 64)).astype(np.float32)
    bias = rng.standard_normal(64).astype(np.float32)
    prog = program_of(pw.pointwise, np.zeros_like(a), a, bias, op="add")
    loads = [i for i in prog if i.opcode == "dma_copy"]
    assert len(loads) == 2 * len([i for i in prog if i.opcode == "tensor_tensor"]) + 1
    np.testing.assert_array_equal(run("add", a, bias), a + bias)


# ---------------------------------------------------------------- multi-tensor


def _foreach_mul_(ts):
    pw.pointwise_multi(ts, ts, op="mul", other=3.0)


def test_pointwise_multi(rng):
    shapes = [(3, 4), (129,), (2, 3, 5)]
    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    ys = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    outs = [np.zeros(s, np.float32) for s in shapes]
    run_views(pw.pointwise_multi, outs, xs, ys, op="add", alpha=[1.0, 2.0, -1.0])
    for o, x, y, al in zip(outs, xs, ys, (1.0, 2.0, -1.0), strict=True):
        check(o, x.astype(np.float64) + al * y, factor=1)
    want = [x * np.float32(3.0) for x in xs]
    nki.simulate(_foreach_mul_)(xs)  # in place: the same HBM tensors as outs and inputs
    for x, w in zip(xs, want, strict=True):
        np.testing.assert_array_equal(x, w)
    bf = [np.zeros(s, BF16) for s in shapes]
    run_views(pw.pointwise_multi, bf, ys, op="copy")  # _foreach_copy_ with a cast
    for o, y in zip(bf, ys, strict=True):
        np.testing.assert_array_equal(o, y.astype(BF16))


# ---------------------------------------------------------------- rejections


@pytest.mark.parametrize(
    ("args", "attrs", "match"),
    [
        (
            (np.zeros(4, np.float32), np.zeros(4, np.float32)),
            {"op": "frobnicate"},
            "op='frobnicate' is not a pointwise op",
        ),
        (
            (np.zeros(4, np.float32), np.zeros(4, np.float32), np.zeros(4, np.float32)),
            {"op": "bitwise_and"},
            "does not take floating-point operands",
        ),
        (
            (np.zeros(4, np.uint16), np.zeros(4, np.uint16)),
            {"op": "neg"},
            "dtype uint16 is not supported",
        ),
        (
            (np.zeros(4, np.float32), np.zeros(3, np.float32)),
            {"op": "exp"},
            r"does not broadcast to the output shape \[4\]",
        ),
        ((np.zeros(4, np.float32),), {"op": "add"}, "missing operand"),
        (
            (np.zeros(4, np.float32), np.zeros(4, np.float32)),
            {"op": "exp", "alpha": 2},
            "unexpected argument alpha=2",
        ),
        (
            (np.zeros(4, np.int32), np.zeros(4, np.int32)),
            {"op": "exp"},
            "does not take integer or bool operands",
        ),
        (
            (np.zeros(4, np.float32), np.zeros(4, np.float32)),
            {"op": "neg", "int64": [3]},
            "names operand 3",
        ),
    ],
    ids=[
        "unknown-op",
        "bitwise-float",
        "dtype",
        "broadcast",
        "missing",
        "attr",
        "int-exp",
        "int64-name",
    ],
)
def test_rejections_at_callers_line(args, attrs, match):
    assert_rejected(match, pw.pointwise, *args, **attrs)


def test_every_op_has_a_reference_and_a_test():
    tested = {
        *UNARY,
        *BINARY,
        *BACKWARD,
        "gelu",
        "isnan",
        "isinf",
        "isfinite",
        "logical_not",
        "clamp",
        "where",
        "masked_fill",
        "addcmul",
        "addcdiv",
        "lerp",
        "elu_backward",
        "dropout",
        "bitwise_and",
        "bitwise_or",
        "bitwise_xor",
        "bitwise_not",
    }
    extra = {s.name for s in pointwise_extra.EXTRA}  # tested in test_pointwise_extra_kernel.py
    assert set(pw.ops()) - {"copy"} == tested | extra
    assert all(callable(s.ref) for s in pointwise_ops.UNARY)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_random_layouts_sweep(seed):
    rng = np.random.default_rng(500 + seed)
    nd = int(rng.integers(1, 5))
    shape = tuple(int(n) for n in rng.integers(1, 300 if nd < 3 else 40, nd))
    a = rng.standard_normal(shape).astype(np.float32)
    perm = rng.permutation(nd)
    at = np.ascontiguousarray(a.transpose(perm))
    strides = [0] * nd
    acc = 1
    for d in reversed(range(nd)):
        strides[perm[d]] = acc
        acc *= shape[perm[d]]
    view = Strided(at, shape, strides)
    b = rng.standard_normal(shape[-1:]).astype(np.float32)
    out = np.zeros(shape, np.float32)
    run_views(pw.pointwise, out, view, b, op="sub", alpha=0.5)
    check(out, a.astype(np.float64) - 0.5 * b, factor=1)


def _permuted_view(rng, a):
    """`a` as a view of a permuted contiguous copy (a non-contiguous layout of its values)."""
    perm = rng.permutation(a.ndim)
    base = np.ascontiguousarray(a.transpose(perm))
    strides = [0] * a.ndim
    acc = 1
    for d in reversed(range(a.ndim)):
        strides[perm[d]] = acc
        acc *= a.shape[perm[d]]
    return Strided(base, a.shape, strides)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(8))
def test_random_ops_dtypes_layouts_sweep(seed):
    rng = np.random.default_rng(900 + seed)
    dtype = (np.float32, BF16, np.float16)[seed % 3]
    nd = int(rng.integers(1, 4))
    shape = tuple(int(n) for n in rng.integers(1, 200 if nd < 3 else 30, nd))
    for op in sorted(UNARY):
        kind, _, factor, attrs = UNARY[op]
        x = np.resize(_inputs(rng, kind), shape)  # the op's input kind, repeated
        with np.errstate(over="ignore"):  # fp16: large inputs become inf
            x = x.astype(np.float32).astype(dtype)
        if op in ("log", "log2", "log10", "sqrt", "rsqrt"):
            x = np.abs(x)
        out = np.zeros(shape, dtype)
        run_views(pw.pointwise, out, _permuted_view(rng, x), op=op, **attrs)
        with np.errstate(over="ignore"):  # results beyond the dtype's range round to inf
            want = pw.pointwise_ref(op, x.astype(np.float32), **attrs).astype(dtype)
        check(out, want, np.dtype(dtype).name, factor=2 * factor)
    for op in ("add", "mul", "div", "maximum", "atan2", "lerp"):
        a = rng.standard_normal(shape).astype(dtype)
        b = (rng.standard_normal(shape[-1:]) + 3).astype(dtype)  # broadcast along rows
        extra = (np.full(shape[-1:], 0.3, dtype),) if op == "lerp" else ()
        out = np.zeros(shape, dtype)
        run_views(pw.pointwise, out, _permuted_view(rng, a), b, *extra, op=op)
        want = pw.pointwise_ref(
            op, a.astype(np.float32), b.astype(np.float32), *(e.astype(np.float32) for e in extra)
        )
        check(out, want, np.dtype(dtype).name, factor=4)


@pytest.mark.parametrize("op", ["remainder", "fmod", "div_floor", "div_trunc"])
def test_quotients_rounded_below_an_integer_are_corrected(op):
    """x * (1/y) can land an ulp below an exact integer quotient (5.125 / 5.125 =
    0.99999994): the remainder correction restores floor/trunc of the exact quotient (here
    with divisors whose multiples are exact in fp32, where the correction is exact)."""
    x = np.array([5.125, -5.125, 7.0, -7.0, 4.5, -4.5, 0.75, 10.0, -10.0, 11.25], np.float32)
    y = np.array([5.125, 5.125, 3.5, -3.5, 1.5, 1.5, 0.25, -2.5, 2.5, 0.375], np.float32)
    x, y = np.tile(x, (8, 1)), np.tile(y, (8, 1))
    name, attrs = (("div", {"rounding_mode": op[4:]}) if op.startswith("div") else (op, {}))
    got = run(name, x, y, **attrs)
    tx, ty = torch.from_numpy(x).double(), torch.from_numpy(y).double()
    exact = {"remainder": torch.remainder, "fmod": torch.fmod,
             "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
             "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc")}[op](tx, ty)
    np.testing.assert_allclose(got, exact.float().numpy(), rtol=0, atol=2e-6)
