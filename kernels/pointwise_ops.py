"""The pointwise op table, part 1: unary ops (math, activations, rounding, predicates, clamp),
each with its tile bodies and float64 numpy reference.

Layer: kernel library (trnsim.kernels); NKI API only. Op names and attribute names are ATen's;
semantics are PyTorch CPU's. How each composite keeps ScalarE inside its valid input ranges is
documented in kernels/_pw_math.py. Bodies: body(k, dst, v, a) with k a TileOps, dst the result
tile (the output's dtype; int32 in the integer domain), v the operand tiles (or scalars) by
name and a the attributes.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

from . import _pw_math as M
from ._pw_tile import F32, FLT_MAX, GPSIMD, OpSpec, TileOps, is_tile, register

LN2 = math.log(2.0)
_ERF = np.vectorize(math.erf, otypes=[np.float64])
_FINITE_MAX = {"float32": FLT_MAX, "bfloat16": 3.3895313892515355e38, "float16": 65504.0}


def _x(v: dict) -> Any:
    return v["input"]


def _zero(k: TileOps) -> Any:
    return k.iconst(0)


# ---------------------------------------------------------------- bodies: arithmetic


def _neg(k, dst, v, a):
    k.act(dst, nl.copy, _x(v), scale=-1.0)


def _neg_int(k, dst, v, a):
    k.tt(dst, _zero(k), _x(v), nl.subtract, GPSIMD)


def _abs(k, dst, v, a):
    k.ts(dst, _x(v), nl.abs)


def _abs_int(k, dst, v, a):
    n = k.tmp(nl.int32, "abs_neg")
    k.tt(n, _zero(k), _x(v), nl.subtract, GPSIMD)
    k.tt(dst, _x(v), n, nl.maximum, GPSIMD)


def _sign(k, dst, v, a):
    # (x > 0) - (x < 0): 0 for nan as in PyTorch (the activation's sign keeps nan)
    neg = k.tmp(name="sign_neg")
    k.ts(neg, _x(v), nl.less, 0.0)
    k.stt(dst, _x(v), nl.greater, 0.0, nl.subtract, neg)


def _square(k, dst, v, a):
    k.tt(dst, _x(v), _x(v), nl.multiply)


def _square_int(k, dst, v, a):
    k.tt(dst, _x(v), _x(v), nl.multiply, GPSIMD)


def _relu_int(k, dst, v, a):
    k.tt(dst, _x(v), _zero(k), nl.maximum, GPSIMD)


def _act(fn: Any, scale: float = 1.0):
    def body(k, dst, v, a):
        k.act(dst, fn, _x(v), scale=scale)

    return body


def _sqrt(k, dst, v, a):
    # ALU power (no documented input range) rather than the sqrt activation ([2^-116, 2^118]
    # excludes 0)
    k.ts(dst, _x(v), nl.maximum, -FLT_MAX, nl.power, 0.5)  # -inf -> nan, not pow's +inf


def _rsqrt(k, dst, v, a):
    # GpSimd's rsqrt (precise, SBUF only; nki-api.md §6.2); rsqrt(0) = inf
    nisa.tensor_scalar(dst=dst, data=_x(v), op0=nl.rsqrt, operand0=None, engine=GPSIMD)


def _reciprocal(k, dst, v, a):
    k.ts(dst, _x(v), nl.reciprocal)


def _expm1(k, dst, v, a):
    M.expm1(k, dst, _x(v))


def _wide(x: Any) -> bool:
    """Whether values of x's dtype can leave log's [2^-64, 2^64] range."""
    return x.dtype.name in ("float32", "bfloat16")


def _log(scale: float):
    def body(k, dst, v, a):
        M.log_scaled(k, dst, _x(v), scale=scale, wide=_wide(_x(v)))

    return body


def _log1p(k, dst, v, a):
    # log1p(x) = log(u) + (x - (u - 1)) / u with u = fl(1 + x): the correction restores the
    # low bits of x lost in 1 + x.
    x = _x(v)
    u = k.tmp(name="l1p_u")
    k.ts(u, x, nl.add, 1.0)
    c = k.tmp(name="l1p_c")
    k.stt(c, u, nl.subtract, 1.0, nl.subtract, x, rev1=True)
    r = k.tmp(name="l1p_r")
    k.ts(r, u, nl.reciprocal)
    k.tt(c, c, r, nl.multiply)
    M.log_scaled(k, dst, u, extra=c, wide=True)


def _gelu(k, dst, v, a):
    approx = a["approximate"]
    k.act(dst, nl.gelu_apprx_tanh if approx == "tanh" else nl.gelu, _x(v))


def _softplus(k, dst, v, a):
    beta, thr = float(a["beta"]), float(a["threshold"])
    x = _x(v)
    if beta == 1.0:
        k.act(dst, nl.softplus, x)
    else:
        y = k.tmp(name="sp_y")
        k.act(y, nl.softplus, x, scale=beta)
        k.ts(dst, y, nl.multiply, 1.0 / beta)
    big = k.pred(x, nl.greater, thr) if beta == 1.0 else _scaled_pred(k, x, beta, thr)
    k.overwrite(dst, big, M.like(k, dst, x))


def _scaled_pred(k: TileOps, x: Any, scale: float, thr: float) -> Any:
    p = k.tmp(nl.uint8, "pw_pred")
    k.ts(p, x, nl.multiply, scale, nl.greater, thr)
    return p


def _elu(k, dst, v, a):
    alpha, scale, iscale = float(a["alpha"]), float(a["scale"]), float(a["input_scale"])
    x = _x(v)
    m = k.tmp(name="elu_m")
    k.ts(m, x, nl.minimum, 0.0)
    em1 = k.tmp(name="elu_em1")
    M.expm1(k, em1, m, iscale)
    pos = k.tmp(name="elu_pos")
    k.act(pos, nl.relu, x, scale=scale if scale > 0 else 1.0)
    if scale <= 0:
        k.ts(pos, pos, nl.multiply, scale)
    k.stt(dst, em1, nl.multiply, alpha * scale, nl.add, pos)


def _leaky_relu(k, dst, v, a):
    s = float(a["negative_slope"])
    k.stt(dst, _x(v), nl.multiply, s, nl.maximum if s <= 1.0 else nl.minimum, _x(v))


def _hardtanh(k, dst, v, a):
    k.ts(dst, _x(v), nl.maximum, float(a["min_val"]), nl.minimum, float(a["max_val"]))


def _hardsigmoid(k, dst, v, a):
    h = k.tmp(name="hsig")
    k.act(h, nl.relu, _x(v), scale=1.0 / 6.0, bias=0.5)
    k.ts(dst, h, nl.minimum, 1.0)


def _hardswish(k, dst, v, a):
    h = k.tmp(name="hswish")
    k.act(h, nl.relu, _x(v), scale=1.0 / 6.0, bias=0.5)
    k.stt(dst, h, nl.minimum, 1.0, nl.multiply, _x(v))


def _trig(cosine: bool):
    def body(k, dst, v, a):
        M.sin_reduced(k, dst, _x(v), cosine)

    return body


def _rounding(mode: str):
    def body(k, dst, v, a):
        M.round_int(k, dst, _x(v), mode)

    return body


def _frac(k, dst, v, a):
    t = k.tmp(name="frac_t")
    M.round_int(k, t, _x(v), "trunc")
    k.tt(dst, _x(v), t, nl.subtract)


def _identity_int(k, dst, v, a):
    k.copy(dst, _x(v))


# ---------------------------------------------------------------- bodies: predicates, clamp


def _logical_not(k, dst, v, a):
    k.ts(dst, _x(v), nl.equal, 0.0)


def _bitwise_not_int(k, dst, v, a):
    if k.out_dtype == "bool":  # ~ on bool is logical not
        _logical_not(k, dst, v, a)
    else:
        k.ts(dst, _x(v), nl.invert)


def _isnan(k, dst, v, a):
    k.tt(dst, _x(v), _x(v), nl.not_equal)


def _isinf(k, dst, v, a):
    k.ts(dst, _x(v), nl.abs, None, nl.equal, math.inf)


def _isfinite(k, dst, v, a):
    k.ts(dst, _x(v), nl.abs, None, nl.less, math.inf)


def _const_int(value: int):
    def body(k, dst, v, a):
        nisa.memset(dst=dst, value=value)

    return body


def _nan_to_num(k, dst, v, a):
    x = _x(v)
    fmax = _FINITE_MAX.get(k.out_dtype, FLT_MAX)
    pos, neg = a["posinf"], a["neginf"]
    k.ts(
        dst,
        x,
        nl.maximum,
        -fmax if neg is None else -FLT_MAX,
        nl.minimum,
        fmax if pos is None else FLT_MAX,
    )
    if pos is not None:
        k.overwrite(dst, k.pred(x, nl.equal, math.inf), float(pos))
    if neg is not None:
        k.overwrite(dst, k.pred(x, nl.equal, -math.inf), float(neg))
    nan = k.tmp(nl.uint8, "nan_pred")
    k.tt(nan, x, x, nl.not_equal)
    k.overwrite(dst, nan, float(a["nan"]))


def _clamp_with(engine: Any):
    def body(k, dst, v, a):
        x, lo, hi = _x(v), v.get("min"), v.get("max")
        if lo is None and hi is None:
            k.copy(dst, x)
            return
        if not is_tile(lo) and not is_tile(hi) and engine is None:
            ops = [(nl.maximum, lo), (nl.minimum, hi)]
            ops = [(o, float(c)) for o, c in ops if c is not None]
            k.ts(dst, x, ops[0][0], ops[0][1], *(ops[1] if len(ops) > 1 else (None, None)))
            return
        cur = x
        steps = [(nl.maximum, lo), (nl.minimum, hi)]
        steps = [(o, c) for o, c in steps if c is not None]
        for i, (o, c) in enumerate(steps):
            out = dst if i == len(steps) - 1 else k.tmp(dst.dtype if engine else F32, "clamp_t")
            c = c if is_tile(c) else (k.iconst(int(c)) if engine is not None else float(c))
            if is_tile(c):
                k.tt(out, cur, c, o, engine)
            else:
                k.binop(out, cur, c, o)
            cur = out

    return body


# ---------------------------------------------------------------- references


def _np_sign(x):
    return np.where(x > 0, 1.0, np.where(x < 0, -1.0, 0.0))


def _phi(x):
    return 0.5 * (1.0 + _ERF(x / math.sqrt(2.0)))


def _gelu_ref(v, a):
    x = v["input"]
    if a["approximate"] == "tanh":
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    return x * _phi(x)


def _softplus_ref(v, a):
    x, b = v["input"], float(a["beta"])
    return np.where(x * b > a["threshold"], x, np.logaddexp(0.0, x * b) / b)


def _elu_ref(v, a):
    x = v["input"]
    neg = a["alpha"] * np.expm1(np.minimum(x, 0.0) * a["input_scale"])
    return a["scale"] * np.where(x > 0, x, neg)


def _leaky_ref(v, a):
    x = v["input"]
    return np.where(x > 0, x, x * a["negative_slope"])


def _nan_to_num_ref(v, a):  # for a float32 output (infinities become its finite extremes)
    x = v["input"]
    pos = FLT_MAX if a["posinf"] is None else a["posinf"]
    neg = -FLT_MAX if a["neginf"] is None else a["neginf"]
    return np.nan_to_num(x, nan=a["nan"], posinf=pos, neginf=neg)


def _clamp_ref(v, a):
    x = v["input"]
    if v.get("min") is not None:
        x = np.maximum(x, v["min"])
    if v.get("max") is not None:
        x = np.minimum(x, v["max"])
    return x


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _u(fn):
    """A reference of the operand 'self' alone."""
    return lambda v, a: fn(v["input"])


def _spec(
    name: str, fbody, ref, ibody=None, temps: int = 1, attrs=None, result: str = "same"
) -> OpSpec:
    return OpSpec(name, ("input",), fbody, ibody, ref, dict(attrs or {}), temps, (), result)


UNARY = (
    _spec("neg", _neg, _u(np.negative), _neg_int),
    _spec("abs", _abs, _u(np.abs), _abs_int, temps=1),
    _spec("sign", _sign, _u(_np_sign), _sign, temps=1),
    _spec("exp", _act(nl.exp), _u(np.exp)),
    _spec("exp2", _act(nl.exp, LN2), _u(np.exp2)),
    _spec("expm1", _expm1, _u(np.expm1), temps=2),
    _spec("log", _log(1.0), _u(np.log), temps=9),
    _spec("log2", _log(1.0 / LN2), _u(np.log2), temps=10),
    _spec("log10", _log(1.0 / math.log(10.0)), _u(np.log10), temps=10),
    _spec("log1p", _log1p, _u(np.log1p), temps=12),
    _spec("sqrt", _sqrt, _u(np.sqrt)),
    _spec("rsqrt", _rsqrt, _u(lambda x: 1.0 / np.sqrt(x))),
    _spec("reciprocal", _reciprocal, _u(lambda x: 1.0 / x)),
    _spec("sigmoid", _act(nl.sigmoid), _u(_sigmoid)),
    _spec("tanh", _act(nl.tanh), _u(np.tanh)),
    _spec("relu", _act(nl.relu), _u(lambda x: np.maximum(x, 0)), _relu_int),
    _spec("gelu", _gelu, _gelu_ref, attrs={"approximate": "none"}),
    _spec("silu", _act(nl.silu), _u(lambda x: x * _sigmoid(x))),
    _spec("mish", _act(nl.mish), _u(lambda x: x * np.tanh(np.logaddexp(0.0, x)))),
    _spec("softplus", _softplus, _softplus_ref, temps=2, attrs={"beta": 1.0, "threshold": 20.0}),
    _spec("elu", _elu, _elu_ref, temps=5, attrs={"alpha": 1.0, "scale": 1.0, "input_scale": 1.0}),
    _spec("leaky_relu", _leaky_relu, _leaky_ref, attrs={"negative_slope": 0.01}),
    _spec(
        "hardtanh",
        _hardtanh,
        lambda v, a: np.clip(v["input"], a["min_val"], a["max_val"]),
        attrs={"min_val": -1.0, "max_val": 1.0},
    ),
    _spec("hardsigmoid", _hardsigmoid, _u(lambda x: np.clip(x + 3.0, 0.0, 6.0) / 6.0)),
    _spec("hardswish", _hardswish, _u(lambda x: x * np.clip(x + 3.0, 0.0, 6.0) / 6.0)),
    _spec("sin", _trig(False), _u(np.sin), temps=3),
    _spec("cos", _trig(True), _u(np.cos), temps=3),
    _spec("erf", _act(nl.erf), _u(_ERF)),
    _spec("floor", _rounding("floor"), _u(np.floor), _identity_int, temps=4),
    _spec("ceil", _rounding("ceil"), _u(np.ceil), _identity_int, temps=4),
    _spec("round", _rounding("round"), _u(np.round), _identity_int, temps=4),
    _spec("trunc", _rounding("trunc"), _u(np.trunc), _identity_int, temps=5),
    _spec("frac", _frac, _u(lambda x: x - np.trunc(x)), temps=6),
    _spec("square", _square, _u(np.square), _square_int),
    _spec("logical_not", _logical_not, _u(lambda x: x == 0), _logical_not, result="bool"),
    _spec("bitwise_not", None, _u(np.invert), _bitwise_not_int),
    _spec("isnan", _isnan, _u(np.isnan), _const_int(0), result="bool"),
    _spec("isinf", _isinf, _u(np.isinf), _const_int(0), result="bool"),
    _spec("isfinite", _isfinite, _u(np.isfinite), _const_int(1), result="bool"),
    _spec(
        "nan_to_num",
        _nan_to_num,
        _nan_to_num_ref,
        _identity_int,
        temps=2,
        attrs={"nan": 0.0, "posinf": None, "neginf": None},
    ),
    OpSpec(
        "clamp",
        ("input", "min", "max"),
        _clamp_with(None),
        _clamp_with(GPSIMD),
        _clamp_ref,
        {},
        1,
        ("min", "max"),
    ),
)
register(*UNARY)
