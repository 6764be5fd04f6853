"""The pointwise op table, part 5: further ATen ops composed from the same building blocks
(relu6, threshold, selu, celu, logit, isposinf, isneginf, signbit, copysign, fmax, fmin, hypot,
xlogy, floor_divide, bit shifts, tan, atan, asin, acos, atanh, sinh, cosh, and the
hardsigmoid / hardswish / logit backward ops), each with its tile bodies and float64 numpy
reference.

Layer: kernel library (trnsim.kernels); NKI API only. ScalarE's arctan takes [-pi/2, pi/2]
(nki-api.md §8.2): atan, asin and acos go through atan2's octant reduction (arctan of a ratio
in [0, 1]); tan shares sin/cos's range reduction; logs are _pw_math.log_scaled (every fp32
input). PyTorch's arithmetic right shift of signed integers is built from the ALU's logical
one: ((x ^ s) >> n) ^ s with s = -(x < 0).
"""

from __future__ import annotations

import math

import numpy as np

from trnsim.nki import language as nl

from . import _pw_math as M
from . import pointwise_binary as B
from . import pointwise_ops as U
from ._pw_tile import FLT_MAX, GPSIMD, I32, SCALAR, U8, VECTOR, OpSpec, is_tile, register

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946
LN2 = math.log(2.0)


def _x(v):
    return v["input"]


def _relu6(k, dst, v, a):
    k.ts(dst, _x(v), nl.maximum, 0.0, nl.minimum, 6.0)


def _relu6_int(k, dst, v, a):
    t = k.tmp(I32, "relu6")
    k.tt(t, _x(v), k.iconst(0), nl.maximum, GPSIMD)
    k.tt(dst, t, k.iconst(6), nl.minimum, GPSIMD)


def _threshold(k, dst, v, a):  # x <= threshold ? value : x  (nan stays nan)
    x = _x(v)
    k.copy(dst, x)
    k.overwrite(dst, k.pred(x, nl.less_equal, float(a["threshold"])), a["value"])


def _elu_with(alpha: float | None, scale: float, inv_alpha_input: bool):
    def body(k, dst, v, a):
        al = float(a["alpha"]) if alpha is None else alpha
        attrs = {"alpha": al, "scale": scale, "input_scale": 1.0 / al if inv_alpha_input else 1.0}
        U._elu(k, dst, v, attrs)

    return body


def _logit(k, dst, v, a):  # log(x / (1 - x)), x clamped to [eps, 1 - eps] if eps is given
    x, eps = _x(v), a["eps"]
    if eps is not None:
        xc = k.tmp(name="logit_x")
        k.ts(xc, x, nl.maximum, float(eps), nl.minimum, 1.0 - float(eps))
        x = xc
    d = k.tmp(name="logit_d")
    k.ts(d, x, nl.multiply, -1.0, nl.add, 1.0)
    k.ts(d, d, nl.reciprocal)
    k.tt(d, x, d, nl.multiply)
    M.log_scaled(k, dst, d)


def _is_value(value: float):
    def body(k, dst, v, a):
        k.ts(dst, _x(v), nl.equal, value)

    return body


def _signbit(k, dst, v, a):
    x = _x(v)
    bits = {4: nl.int32, 2: nl.int16}[x.dtype.itemsize]
    k.ts(dst, x.view(bits), nl.right_shift, 8 * x.dtype.itemsize - 1, nl.bitwise_and, 1)


def _signbit_int(k, dst, v, a):
    k.ts(dst, _x(v), nl.less, 0.0)


def _copysign(k, dst, v, a):  # |x| with the sign bit of other (-0, -nan count as negative)
    x, y = v["input"], v["other"]
    if not is_tile(y):
        k.ts(dst, x, nl.abs, None, nl.multiply, math.copysign(1.0, float(y)))
        return
    ax = k.tmp(name="cps_ax")
    k.ts(ax, x, nl.abs)
    f = k.tmp(name="cps_f")
    k.ts(f, B._sign_bit(k, y), nl.multiply, -2.0, nl.add, 1.0)
    k.tt(dst, ax, f, nl.multiply)


def _fnan(fn):
    def body(k, dst, v, a):  # the non-nan operand where one is nan (fmax / fmin)
        x, y = v["input"], v["other"]
        x2, y2 = k.tmp(name="fm_x"), k.tmp(name="fm_y")
        k.copy(x2, x)
        nan = k.tmp(U8, "fm_nan")
        k.tt(nan, y, y, nl.not_equal, GPSIMD)
        k.copy(y2, y)
        k.overwrite(y2, nan, x2)  # y := x where y is nan
        k.tt(nan, x2, x2, nl.not_equal, GPSIMD)
        k.overwrite(x2, nan, y2)  # x := y where x is nan
        k.tt(dst, x2, y2, fn)

    return body


def _hypot(k, dst, v, a):  # max * sqrt(1 + (min/max)^2); inf where either is +-inf
    x, y = v["input"], v["other"]
    ax, ay = k.tmp(name="hy_ax"), k.tmp(name="hy_ay")
    k.ts(ax, x, nl.abs, None, nl.minimum, FLT_MAX)
    k.ts(ay, y, nl.abs, None, nl.minimum, FLT_MAX)
    hi, lo = k.tmp(name="hy_hi"), k.tmp(name="hy_lo")
    k.tt(hi, ax, ay, nl.maximum, VECTOR)
    k.tt(lo, ax, ay, nl.minimum, GPSIMD)
    r = k.tmp(name="hy_r")
    k.ts(r, hi, nl.maximum, 2.0**-126, nl.reciprocal)
    k.tt(lo, lo, r, nl.multiply)
    k.tt(lo, lo, lo, nl.multiply, GPSIMD)
    k.ts(lo, lo, nl.add, 1.0, nl.power, 0.5)
    k.tt(dst, hi, lo, nl.multiply)
    inf = k.tmp(name="hy_inf")
    k.ts(inf, x, nl.abs, None, nl.equal, math.inf)
    big = k.tmp(U8, "hy_big")
    k.ts(ay, y, nl.abs, None, nl.equal, math.inf)
    k.tt(big, inf, ay, nl.maximum, GPSIMD)
    k.overwrite(dst, big, math.inf)


def _xlogy(k, dst, v, a):  # x * log(y); 0 where x == 0 (unless y is nan)
    x, y = v["input"], v["other"]
    if not is_tile(y):
        ly = math.log(y) if y > 0 else (-math.inf if y == 0 else math.nan)
        k.ts(dst, x, nl.multiply, ly)
        if not math.isnan(float(y)):
            k.overwrite(dst, k.pred(x, nl.equal, 0.0), 0.0)
        return
    lg = k.tmp(name="xl_log")
    M.log_scaled(k, lg, y)
    k.binop(dst, x, lg, nl.multiply)
    keep = k.tmp(name="xl_keep")
    k.tt(keep, y, y, nl.equal, GPSIMD)  # y is not nan
    if is_tile(x):
        zero = k.tmp(U8, "xl_zero")
        k.stt(zero, x, nl.equal, 0.0, nl.multiply, keep)
        k.overwrite(dst, zero, 0.0)
    elif float(x) == 0.0:
        zero = k.tmp(U8, "xl_zero")
        k.copy(zero, keep)
        k.overwrite(dst, zero, 0.0)


def _floor_divide(int_domain: bool):
    def body(k, dst, v, a):
        attrs = {"rounding_mode": "floor"}
        (B._div_int if int_domain else B._div)(k, dst, v, attrs)

    return body


def _lshift(k, dst, v, a):
    x, y = v["input"], v["other"]
    if is_tile(x) and not is_tile(y):
        k.ts(dst, x, nl.left_shift, int(y))
    else:
        k.tt(dst, B._iv(k, x), B._iv(k, y), nl.left_shift, VECTOR)


def _rshift(k, dst, v, a):  # arithmetic for signed ints: ((x ^ s) >> n) ^ s, s = -(x < 0)
    x, y = B._iv(k, v["input"]), v["other"]
    s = k.tmp(I32, "rsh_s")
    k.ts(s, x, nl.less, 0.0, nl.multiply, -1.0)
    t = k.tmp(I32, "rsh_t")
    k.tt(t, x, s, nl.bitwise_xor, VECTOR)
    if is_tile(y):
        k.tt(t, t, y, nl.right_shift, VECTOR)
    else:
        k.ts(t, t, nl.right_shift, int(y))
    k.tt(dst, t, s, nl.bitwise_xor, VECTOR)


def _tan(k, dst, v, a):
    s, c = k.tmp(name="tan_s"), k.tmp(name="tan_c")
    M.sin_reduced(k, s, _x(v))
    M.sin_reduced(k, c, _x(v), cosine=True)
    k.ts(c, c, nl.reciprocal)
    k.tt(dst, s, c, nl.multiply)


def _atan(k, dst, v, a):
    """arctan of min(|x|, 1/|x|) (within arctan's range), pi/2 - it where |x| > 1, x's sign."""
    x = _x(v)
    ax, r = k.tmp(name="atan_ax"), k.tmp(name="atan_r")
    k.ts(ax, x, nl.abs)
    k.ts(r, x, nl.abs, None, nl.reciprocal)
    k.tt(r, ax, r, nl.minimum, GPSIMD)
    ang = k.tmp(name="atan_a")
    k.act(ang, nl.arctan, r)
    k.ts(r, ang, nl.multiply, -1.0, nl.add, math.pi / 2, engine=SCALAR)
    k.overwrite(ang, k.pred(ax, nl.greater, 1.0), r)
    sgn = k.tmp(name="atan_sgn")
    k.ts(sgn, B._sign_bit(k, x), nl.multiply, -2.0, nl.add, 1.0)
    k.tt(dst, ang, sgn, nl.multiply, GPSIMD)


def _arcsin(cos: bool):
    def body(k, dst, v, a):  # atan2(x, sqrt((1-x)(1+x))) (asin) or atan2(sqrt(...), x) (acos)
        x = _x(v)
        p, q = k.tmp(name="asin_p"), k.tmp(name="asin_q")
        k.ts(p, x, nl.multiply, -1.0, nl.add, 1.0)
        k.ts(q, x, nl.add, 1.0)
        k.tt(p, p, q, nl.multiply)
        k.ts(p, p, nl.maximum, -FLT_MAX, nl.power, 0.5)  # |x| > 1 -> nan
        pair = {"input": p, "other": x} if cos else {"input": x, "other": p}
        B._atan2(k, dst, pair, a)

    return body


def _atanh(k, dst, v, a):  # 0.5 * log1p(2x / (1 - x))
    x = _x(v)
    d = k.tmp(name="atanh_d")
    k.ts(d, x, nl.multiply, -1.0, nl.add, 1.0)
    k.ts(d, d, nl.reciprocal)
    k.stt(d, x, nl.multiply, 2.0, nl.multiply, d)
    t = k.tmp(name="atanh_t")
    U._log1p(k, t, {"input": d}, a)
    k.ts(dst, t, nl.multiply, 0.5)


def _cosh(k, dst, v, a):  # exp(x - ln2) + exp(-x - ln2): no overflow before cosh itself
    e1, e2 = k.tmp(name="cosh_a"), k.tmp(name="cosh_b")
    k.act(e1, nl.exp, _x(v), bias=-LN2)
    k.act(e2, nl.exp, _x(v), scale=-1.0, bias=-LN2)
    k.tt(dst, e1, e2, nl.add)


def _sinh(k, dst, v, a):
    """|x| >= 1: exp(x - ln2) - exp(-x - ln2); else u (u + 2) / (2 (u + 1)) with u = expm1(x),
    free of cancellation near 0."""
    x = _x(v)
    e1, e2 = k.tmp(name="sinh_a"), k.tmp(name="sinh_b")
    k.act(e1, nl.exp, x, bias=-LN2)
    k.act(e2, nl.exp, x, scale=-1.0, bias=-LN2)
    k.tt(dst, e1, e2, nl.subtract)
    u = k.tmp(name="sinh_u")
    M.expm1(k, u, x)
    k.stt(e1, u, nl.add, 2.0, nl.multiply, u)
    k.ts(e2, u, nl.add, 1.0, nl.reciprocal)
    small = k.tmp(dst.dtype, "sinh_small")
    k.stt(small, e1, nl.multiply, 0.5, nl.multiply, e2)
    k.overwrite(dst, k.pred(x, nl.less, 1.0, op0=nl.abs), small)


def _hardsigmoid_backward(k, dst, v, a):  # grad / 6 where -3 < x < 3, else 0
    g, x = v["grad_output"], v["input"]
    inside = k.tmp(name="hsb_in")
    k.ts(inside, x, nl.greater, -3.0)
    p = k.tmp(U8, "hsb_p")
    k.stt(p, x, nl.less, 3.0, nl.multiply, inside)
    g6 = k.tmp(name="hsb_g")
    k.ts(g6, g, nl.multiply, 1.0 / 6.0)
    k.select(dst, p, g6, 0.0)


def _hardswish_backward(k, dst, v, a):  # x <= -3: 0; x >= 3: grad; else grad*(x/3 + 0.5)
    g, x = v["grad_output"], v["input"]
    t = k.tmp(name="hwb_t")
    k.ts(t, x, nl.multiply, 1.0 / 3.0, nl.add, 0.5)
    k.tt(dst, g, t, nl.multiply)  # nan x stays nan, as in PyTorch
    k.overwrite(dst, k.pred(x, nl.greater_equal, 3.0), M.like(k, dst, g))
    k.overwrite(dst, k.pred(x, nl.less_equal, -3.0), 0.0)


def _logit_backward(k, dst, v, a):
    """grad / (x (1 - x)); outside [0, 1] nan, or with eps 0 outside [eps, 1 - eps] (nan x
    included, as PyTorch's mask)."""
    g, x, eps = v["grad_output"], v["input"], a["eps"]
    d = k.tmp(name="lgb_d")
    k.ts(d, x, nl.multiply, -1.0, nl.add, 1.0)
    k.tt(d, x, d, nl.multiply)
    k.ts(d, d, nl.reciprocal)
    if eps is None:
        k.tt(dst, g, d, nl.multiply)
        below = k.tmp(name="lgb_lo")
        k.ts(below, x, nl.less, 0.0)
        out = k.tmp(U8, "lgb_out")
        k.stt(out, x, nl.greater, 1.0, nl.maximum, below)
        k.overwrite(dst, out, math.nan)
        return
    k.tt(d, g, d, nl.multiply)
    above = k.tmp(name="lgb_hi")
    k.ts(above, x, nl.greater_equal, float(eps))
    inside = k.tmp(U8, "lgb_in")
    k.stt(inside, x, nl.less_equal, 1.0 - float(eps), nl.multiply, above)
    k.select(dst, inside, d, 0.0)


# ---------------------------------------------------------------- references


def _u(fn):
    return lambda v, a: fn(v["input"])


def _r2(fn):
    return lambda v, a: fn(v["input"], v["other"])


def _elu_ref(alpha, scale, inv):
    def ref(v, a):
        al = a["alpha"] if alpha is None else alpha
        x = v["input"]
        return scale * np.where(x > 0, x, al * np.expm1(x / al if inv else x))

    return ref


def _logit_ref(v, a):
    x = v["input"]
    if a["eps"] is not None:
        x = np.clip(x, a["eps"], 1 - a["eps"])
    return np.log(x / (1 - x))


def _xlogy_ref(v, a):
    x, y = v["input"], v["other"]
    return np.where(np.isnan(y), np.nan, np.where(x == 0, 0.0, x * np.log(y)))


def _logit_bw_ref(v, a):
    g, x, eps = v["grad_output"], v["input"], a["eps"]
    if eps is None:
        return np.where((x < 0) | (x > 1), np.nan, g / (x * (1 - x)))
    return np.where((x >= eps) & (x <= 1 - eps), g / (x * (1 - x)), 0.0)


def _rshift_ref(v, a):
    x, n = np.asarray(v["input"], np.int64), np.asarray(v["other"], np.int64)
    return np.where((n < 0) | (n >= 64), np.where(x < 0, -1, 0), x >> np.clip(n, 0, 63))


def _spec(
    name, fbody, ref, ibody=None, attrs=None, temps=3, result="same", args=("input",), scalars=()
):
    return OpSpec(name, args, fbody, ibody, ref, dict(attrs or {}), temps, scalars, result)


_BIN = ("input", "other")
EXTRA = (
    _spec("relu6", _relu6, _u(lambda x: np.clip(x, 0, 6)), _relu6_int),
    _spec(
        "threshold",
        _threshold,
        lambda v, a: np.where(v["input"] <= a["threshold"], a["value"], v["input"]),
        attrs={"threshold": 0.0, "value": 0.0},
    ),
    _spec(
        "selu",
        _elu_with(SELU_ALPHA, SELU_SCALE, False),
        _elu_ref(SELU_ALPHA, SELU_SCALE, False),
        temps=5,
    ),
    _spec(
        "celu", _elu_with(None, 1.0, True), _elu_ref(None, 1.0, True), attrs={"alpha": 1.0}, temps=5
    ),
    _spec("logit", _logit, _logit_ref, attrs={"eps": None}, temps=11),
    _spec("isposinf", _is_value(math.inf), _u(np.isposinf), U._const_int(0), result="bool"),
    _spec("isneginf", _is_value(-math.inf), _u(np.isneginf), U._const_int(0), result="bool"),
    _spec("signbit", _signbit, _u(np.signbit), _signbit_int, result="bool"),
    _spec("copysign", _copysign, _r2(np.copysign), args=_BIN, scalars=("other",)),
    _spec("fmax", _fnan(nl.maximum), _r2(np.fmax), B._binop_int(nl.maximum), args=_BIN, temps=4),
    _spec("fmin", _fnan(nl.minimum), _r2(np.fmin), B._binop_int(nl.minimum), args=_BIN, temps=4),
    _spec("hypot", _hypot, _r2(np.hypot), args=_BIN, temps=7),
    _spec("xlogy", _xlogy, _xlogy_ref, args=_BIN, scalars=_BIN, temps=12),
    _spec(
        "floor_divide",
        _floor_divide(False),
        _r2(lambda x, y: np.floor(x / y)),
        _floor_divide(True),
        args=_BIN,
        scalars=("other",),
        temps=8,
    ),
    _spec(
        "bitwise_left_shift",
        None,
        _r2(lambda x, n: np.left_shift(x, n)),
        _lshift,
        args=_BIN,
        scalars=_BIN,
    ),
    _spec("bitwise_right_shift", None, _rshift_ref, _rshift, args=_BIN, scalars=_BIN),
    _spec("tan", _tan, _u(np.tan), temps=5),
    _spec("atan", _atan, _u(np.arctan), temps=4),
    _spec("asin", _arcsin(False), _u(np.arcsin), temps=9),
    _spec("acos", _arcsin(True), _u(np.arccos), temps=9),
    _spec("atanh", _atanh, _u(np.arctanh), temps=13),
    _spec("sinh", _sinh, _u(np.sinh), temps=6),
    _spec("cosh", _cosh, _u(np.cosh), temps=2),
    _spec(
        "hardsigmoid_backward",
        _hardsigmoid_backward,
        lambda v, a: np.where((v["input"] > -3) & (v["input"] < 3), v["grad_output"] / 6, 0.0),
        args=("grad_output", "input"),
    ),
    _spec(
        "hardswish_backward",
        _hardswish_backward,
        lambda v, a: np.where(
            v["input"] <= -3,
            0.0,
            np.where(v["input"] < 3, v["grad_output"] * (v["input"] / 3 + 0.5), v["grad_output"]),
        ),
        args=("grad_output", "input"),
    ),
    _spec(
        "logit_backward",
        _logit_backward,
        _logit_bw_ref,
        attrs={"eps": None},
        args=("grad_output", "input"),
    ),
)
register(*EXTRA)
