"""Composite fp32 math on one tile for the pointwise kernels: range-reduced log and sin/cos,
rounding to integers, expm1. Each helper writes its result into `dst` with its last
instruction (dst's dtype is the output's).

Layer: kernel library (trnsim.kernels); NKI API only. The ScalarE activation functions have
documented valid input ranges (nki-api.md §8.2): log [2^-64, 2^64], sin [-pi, pi], sqrt
[2^-116, 2^118]; outside them the hardware result is undefined. These helpers keep every
activation input inside its range and compose the rest from exact fp32 steps:

* log(x) = log(clamp(x, 2^-64, 2^64)) + log(r), r = x / clamp(x) formed exactly as
  max(x * 2^-64, min(x * 2^64, 1)) (r == 1 for x in [2^-64, 2^64], so that range is as exact as
  the log itself; outside it r is in range for every normal fp32 x). x <= 0, +inf and nan are
  then overwritten with -inf / nan / +inf / nan computed by ALU ops (q - FLT_MAX/q with
  q = sqrt(max(r, -FLT_MAX))).
  fp32 denormals (< 2^-126, which hardware engines may flush) give -inf.
* sin/cos: x - k*2pi with k = round(x / 2pi) (magic-number rounding) and 2pi split in three
  parts (Cody-Waite: k*C1 and k*C2 exact for |k| < 2^14), so the reduced argument is exact to
  ~1e-7 for |x| up to ~1e5; the error then grows ~|x|*6e-8 (about half an ulp of x at 1e6), and
  for |x| > 2^22*2pi (k beyond magic-number rounding) the result is meaningless. cos(x) is
  evaluated as sin(pi/2 - |r|).
* Rounding (round half to even, floor, ceil, trunc) converts to int32 (the hardware's float ->
  int conversion rounds to nearest even, saturating; nki-api.md §5A.2), corrects by one for
  floor/ceil/trunc, and keeps x itself where |x| >= 2^31 (already an integer), +-inf or nan.
"""

from __future__ import annotations

import math
from typing import Any

from trnsim.nki import language as nl

from ._pw_tile import FLT_MAX, GPSIMD, SCALAR, U8, VECTOR, TileOps

LOG_LO, LOG_HI = 2.0**-64, 2.0**64  # log's valid input range (nki-api.md §8.2)
INT_RANGE = 2.0**31  # |x| below which the float -> int32 conversion does not saturate
MAGIC = 1.5 * 2.0**23  # (x + MAGIC) - MAGIC rounds x to an integer (|x| <= 2^22)
TWO_PI = 2.0 * math.pi
INV_TWO_PI = 1.0 / TWO_PI
# 2pi = C1 + C2 + C3 with C1, C2 of 10 significant bits: k*C1 and k*C2 are exact for |k| < 2^14.
_C1 = math.ldexp(math.floor(math.ldexp(TWO_PI, 7)), -7)
_C2 = math.ldexp(math.floor(math.ldexp(TWO_PI - _C1, 17)), -17)
_C3 = TWO_PI - _C1 - _C2
PI_F32_BELOW = 3.1415925  # largest fp32 below pi: sin's range is [-pi, pi] (fp32 pi > pi)


def log_scaled(
    k: TileOps, dst: Any, x: Any, scale: float = 1.0, extra: Any = None, wide: bool = True
) -> None:
    """dst = scale * (log(x) + extra), natural log of fp32 values, every fp32 x (module doc).

    `extra` (an fp32 tile or None) is added before the special values are written (log1p's
    correction). wide=False drops the 2^+-64 extension (inputs known to be within it, e.g.
    fp16 or int32 values)."""
    xc = k.tmp(name="log_xc")
    k.ts(xc, x, nl.maximum, LOG_LO, nl.minimum, LOG_HI)
    terms = []  # added to log(xc), in order
    r, rc = x, xc
    if wide:
        # Engines chosen for balance: VectorE does the clamps and ALU powers, ScalarE the
        # scalings and logs, GpSimd the tensor-tensor steps.
        b = k.tmp(name="log_b")
        k.ts(b, x, nl.multiply, LOG_HI, nl.minimum, 1.0)
        r = k.tmp(name="log_r")
        k.mul_then(r, x, LOG_LO, nl.maximum, b, SCALAR)
        rc = k.tmp(name="log_rc")
        k.ts(rc, r, nl.maximum, LOG_LO, nl.minimum, LOG_HI)
        y2 = k.tmp(name="log_y2")
        k.act(y2, nl.log, rc)
        terms.append(y2)
    if extra is not None:
        terms.append(extra)
    if not terms and scale == 1.0:
        k.act(dst, nl.log, xc)
    else:
        y = k.tmp(name="log_y")
        k.act(y, nl.log, xc)
        last = terms.pop() if scale == 1.0 else None
        for t in terms:
            k.tt(y, y, t, nl.add, GPSIMD)
        if last is not None:
            k.tt(dst, y, last, nl.add, GPSIMD)
        else:
            k.ts(dst, y, nl.multiply, scale)
    # Special values: r == rc except for x <= 0, x = +inf, nan and denormals.
    special = k.tmp(U8, "log_special")
    k.tt(special, r, rc, nl.not_equal, GPSIMD)
    q = k.tmp(name="log_q")
    k.ts(q, r, nl.maximum, -FLT_MAX, nl.power, 0.5)  # sqrt: <0 (and -inf) -> nan
    w = k.tmp(name="log_w")
    k.ts(w, q, nl.abs, None, nl.reciprocal)  # +-0 (and denormal r) -> inf
    sv = k.tmp(dst.dtype, "log_sv")
    k.mul_then(sv, w, -FLT_MAX, nl.add, q, SCALAR)  # 0 -> -inf, +inf -> +inf, <0 -> nan
    k.overwrite(dst, special, sv)


def sin_reduced(k: TileOps, dst: Any, x: Any, cosine: bool = False) -> None:
    """dst = sin(x) (or cos(x)) for any x, via x - k*2pi in [-pi, pi] (module doc)."""
    q = k.tmp(name="trig_q")  # engines chosen for balance between VectorE, ScalarE, GpSimd
    k.ts(q, x, nl.multiply, INV_TWO_PI, nl.add, MAGIC, engine=SCALAR)
    n = k.tmp(name="trig_k")
    k.ts(n, q, nl.subtract, MAGIC, engine=SCALAR)
    r = k.tmp(name="trig_r")
    k.mul_then(r, n, -_C1, nl.add, x, VECTOR)
    k.mul_then(r, n, -_C2, nl.add, r, SCALAR)
    k.mul_then(r, n, -_C3, nl.add, r, SCALAR)
    if cosine:
        k.ts(r, r, nl.abs, None, nl.minimum, PI_F32_BELOW)
        k.act(dst, nl.sin, r, scale=-1.0, bias=math.pi / 2)  # sin(pi/2 - |r|)
    else:
        k.ts(r, r, nl.maximum, -PI_F32_BELOW, nl.minimum, PI_F32_BELOW)
        k.act(dst, nl.sin, r)


def _keep_big(k: TileOps, dst: Any, x: Any, rounded: Any) -> None:
    """dst = rounded where |x| < 2^31, else x (integers already, +-inf, nan)."""
    small = k.pred(x, nl.less, INT_RANGE, op0=nl.abs)
    k.copy(dst, x)
    k.overwrite(dst, small, rounded)


def round_int(k: TileOps, dst: Any, x: Any, mode: str) -> None:
    """dst = round(x) to an integer value; mode 'round' (half to even), 'floor', 'ceil' or
    'trunc' (module doc)."""
    ri = k.tmp(nl.int32, "rnd_i")
    k.copy(ri, x, SCALAR)  # float -> int32: round to nearest even, saturating
    res = k.tmp(dst.dtype, "rnd_res")
    if mode == "round":
        k.copy(res, ri, GPSIMD)
    elif mode in ("floor", "ceil"):
        d = k.tmp(name="rnd_d")
        k.tt(d, ri, x, nl.greater if mode == "floor" else nl.less, GPSIMD)
        k.tt(res, ri, d, nl.subtract if mode == "floor" else nl.add, GPSIMD)
    else:  # trunc: step ri one towards zero where it rounded away from zero
        ax = k.tmp(name="rnd_ax")
        k.ts(ax, x, nl.abs)
        away = k.tmp(name="rnd_away")
        k.stt(away, ri, nl.abs, 0.0, nl.greater, ax)
        sg = k.tmp(name="rnd_sign")
        k.act(sg, nl.sign, ri)
        k.tt(away, away, sg, nl.multiply)
        k.tt(res, ri, away, nl.subtract)
    _keep_big(k, dst, x, res)


def trunc_to_int(k: TileOps, dst: Any, x: Any) -> None:
    """dst (an integer tile) = x rounded towards zero: the float -> int cast of PyTorch
    (out-of-range values saturate, nan gives 0)."""
    ri = k.tmp(nl.int32, "tr_i")
    k.copy(ri, x)
    ax = k.tmp(name="tr_ax")
    k.ts(ax, x, nl.abs)
    away = k.tmp(name="tr_away")
    k.stt(away, ri, nl.abs, 0.0, nl.greater, ax)
    sg = k.tmp(name="tr_sign")
    k.act(sg, nl.sign, ri)
    k.tt(away, away, sg, nl.multiply)
    k.tt(dst, ri, away, nl.subtract)


def expm1(k: TileOps, dst: Any, x: Any, scale: float = 1.0) -> None:
    """dst = exp(scale*x) - 1 without cancellation near 0: tanh(s*x/2) * (exp(s*x) + 1)."""
    t = k.tmp(name="em1_t")
    k.act(t, nl.tanh, x, scale=0.5 * scale)
    e = k.tmp(name="em1_e")
    k.act(e, nl.exp, x, scale=scale)
    k.stt(dst, e, nl.add, 1.0, nl.multiply, t)


def like(k: TileOps, dst: Any, x: Any) -> Any:
    """x as a tile of dst's dtype (x itself when the dtypes match): predicated copies and
    selects need their source in the destination's dtype."""
    if x.dtype == dst.dtype:
        return x
    t = k.tmp(dst.dtype, "pw_like")
    k.copy(t, x)
    return t
