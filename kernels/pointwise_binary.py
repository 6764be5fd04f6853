"""The pointwise op table, part 2: binary ops (arithmetic, division, pow, atan2, comparisons,
logical and bitwise ops), each with its tile bodies and float64 numpy reference.

Layer: kernel library (trnsim.kernels); NKI API only. A scalar operand (other=2.0) is a
tensor_scalar immediate in the float domain and a (P, 1) int32 constant tile in the integer
domain (GpSimd's exact int32 ALU takes tensors only).

Division: the ALU's divide, fmod and mod are not available on hardware (nki-api.md §6.2), so
x / y is x * (1/y) (VectorE reciprocal, then one multiply: within ~1.5 ulp of the correctly
rounded quotient). Float floor/trunc division and remainder/fmod take floor/trunc of that fp32
quotient and correct it once by the remainder r = x - q * y (q moves by one where r has the
wrong sign or |r| >= |y|), so an exact quotient that x * (1/y) rounded below an integer
(5.125 / 5.125 = 0.99999994) still floors to it, as PyTorch's exact fmod gives. r itself is
computed in fp32: where q * y is not exact in fp32 and x / y lies within an ulp of an integer
(12 / 0.3), the result can still be off by one quotient step. With
non-finite operands they follow the fp32 quotient (inf // 2 = inf, -3 // inf = -0; PyTorch gives
nan and -1). Integer division is exact: an fp32 estimate of the quotient, refined once by the
exact int32 remainder (GpSimd), then corrected by one towards floor or trunc. Integer division
by zero gives an undefined value (PyTorch raises).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from trnsim.nki import language as nl

from . import _pw_math as M
from ._common import fail
from ._pw_tile import GPSIMD, I32, VECTOR, OpSpec, TileOps, dtype_scalar, is_tile, register
from ._pw_tile import wrap32 as _wrap32

HALF_PI = math.pi / 2


def _iv(k: TileOps, y: Any) -> Any:
    """An integer operand as an int32 tile (a scalar becomes a constant tile)."""
    return y if is_tile(y) else k.iconst(_wrap32(y))


def _xy(v: dict) -> tuple[Any, Any]:
    return v["input"], v["other"]


# ---------------------------------------------------------------- arithmetic


def _q(k: TileOps, c: Any) -> float:
    """A scalar of add/sub/rsub as PyTorch applies it: converted to the output's dtype
    (alpha and scalar operands of a bf16/fp16 add are bf16/fp16 numbers)."""
    return dtype_scalar(float(c), k.out_dtype)


def _add(k, dst, v, a, sign: float = 1.0):
    x, y = _xy(v)
    alpha = sign * _q(k, a["alpha"])
    if not is_tile(y):
        k.ts(dst, x, nl.add, alpha * _q(k, y))
    elif alpha == 1.0:
        k.tt(dst, x, y, nl.add)
    elif alpha == -1.0:
        k.tt(dst, x, y, nl.subtract)
    else:
        k.stt(dst, y, nl.multiply, alpha, nl.add, x)


def _sub(k, dst, v, a):
    _add(k, dst, v, a, -1.0)


def _rsub(k, dst, v, a):  # other - alpha * self
    x, y = _xy(v)
    alpha = _q(k, a["alpha"])
    if not is_tile(y):
        k.ts(dst, x, nl.multiply, -alpha, nl.add, _q(k, y))
    elif alpha == 1.0:
        k.tt(dst, y, x, nl.subtract)
    else:
        k.stt(dst, x, nl.multiply, -alpha, nl.add, y)


def _add_int(k, dst, v, a, sign: int = 1):
    x, y = _xy(v)
    alpha = sign * int(a["alpha"])
    if not is_tile(y):
        k.tt(dst, x, k.iconst(_wrap32(alpha * int(y))), nl.add, GPSIMD)
        return
    if alpha not in (1, -1):
        t = k.tmp(I32, "add_t")
        k.tt(t, y, k.iconst(_wrap32(alpha)), nl.multiply, GPSIMD)
        y, alpha = t, 1
    k.tt(dst, x, y, nl.add if alpha == 1 else nl.subtract, GPSIMD)


def _sub_int(k, dst, v, a):
    _add_int(k, dst, v, a, -1)


def _rsub_int(k, dst, v, a):
    x, y = _xy(v)
    t = k.tmp(I32, "rsub_t")
    k.tt(t, x, k.iconst(_wrap32(a["alpha"])), nl.multiply, GPSIMD)
    k.tt(dst, _iv(k, y), t, nl.subtract, GPSIMD)


def _binop(op: Any):
    def body(k, dst, v, a):
        x, y = _xy(v)
        k.binop(dst, x, y, op)

    return body


def _binop_int(op: Any, engine: Any = GPSIMD):
    def body(k, dst, v, a):
        x, y = _xy(v)
        if engine == VECTOR and not is_tile(y):
            k.ts(dst, x, op, _wrap32(y))  # bitvec immediates are integers
        elif engine == VECTOR and not is_tile(x):
            k.ts(dst, y, op, _wrap32(x))
        else:
            k.tt(dst, _iv(k, x), _iv(k, y), op, engine)

    return body


# ---------------------------------------------------------------- division


def _quotient(k: TileOps, dst: Any, x: Any, y: Any) -> None:
    """dst = x * (1/y), fp32."""
    if not is_tile(y):
        y = float(y)
        k.ts(dst, x, nl.multiply, 1.0 / y if y else math.copysign(math.inf, y))
        return
    r = k.tmp(name="div_r")
    k.ts(r, y, nl.reciprocal)
    if is_tile(x):
        k.tt(dst, x, r, nl.multiply)
    else:
        k.ts(dst, r, nl.multiply, float(x))


def _times(k: TileOps, dst: Any, a: Any, b: Any) -> None:
    """dst = a * b, either of them a tile, the other a tile or a Python scalar."""
    if is_tile(a) and is_tile(b):
        k.tt(dst, a, b, nl.multiply)
    else:
        t, c = (a, b) if is_tile(a) else (b, a)
        k.ts(dst, t, nl.multiply, float(c))


def _fix_quotient(k: TileOps, q: Any, x: Any, y: Any, mode: str) -> None:
    """q (fp32, integer-valued) = floor or trunc of x / y, corrected once in place: with
    r = x - q*y, floor moves q up where r*y >= y*y (|r| >= |y|, r of y's sign) and down where
    r*y < 0; trunc moves q by sign(x*y) up where r*r >= y*y and r*x >= 0, down where r*x < 0."""
    r = k.tmp(name="fix_r")
    _times(k, r, q, y)
    if is_tile(x):
        k.tt(r, x, r, nl.subtract)
    else:
        k.ts(r, r, nl.subtract, float(x), rev0=True)
    yy = k.tmp(name="fix_yy") if is_tile(y) else None
    if yy is not None:
        k.tt(yy, y, y, nl.multiply)
    up, down = k.tmp(name="fix_up"), k.tmp(name="fix_down")
    if mode == "floor":
        _times(k, down, r, y)  # r*y
        if yy is not None:
            k.tt(up, down, yy, nl.greater_equal)
        else:
            k.ts(up, down, nl.greater_equal, float(y) * float(y))
        k.ts(down, down, nl.less, 0.0)
        k.tt(q, q, up, nl.add)
        k.tt(q, q, down, nl.subtract)
        return
    _times(k, down, r, x)  # r*x
    k.tt(up, r, r, nl.multiply)
    if yy is not None:
        k.tt(up, up, yy, nl.greater_equal)
    else:
        k.ts(up, up, nl.greater_equal, float(y) * float(y))
    k.ts(down, down, nl.less, 0.0)  # q too far from zero
    k.tt(up, up, down, nl.subtract)  # +1: one step away from zero, -1: towards it
    k.ts(up, up, nl.maximum, -1.0, nl.minimum, 1.0)
    s = k.tmp(name="fix_s")
    _times(k, s, x, y)
    k.act(s, nl.sign, s)
    k.tt(up, up, s, nl.multiply)
    k.tt(q, q, up, nl.add)


def _div(k, dst, v, a):
    x, y = _xy(v)
    mode = a["rounding_mode"]
    if mode is None:
        _quotient(k, dst, x, y)
        return
    q = k.tmp(name="div_q")
    _quotient(k, q, x, y)
    M.round_int(k, q, q, mode)
    _fix_quotient(k, q, x, y, mode)
    k.copy(dst, q)


def _remainder_like(mode: str):
    def body(k, dst, v, a):  # x - y * floor(x / y)  (trunc for fmod)
        x, y = _xy(v)
        q = k.tmp(name="rem_q")
        _quotient(k, q, x, y)
        M.round_int(k, q, q, mode)
        _fix_quotient(k, q, x, y, mode)
        if is_tile(y):
            k.tt(q, q, y, nl.multiply)
            k.tt(dst, x, q, nl.subtract)
        else:
            k.stt(dst, q, nl.multiply, -float(y), nl.add, x)

    return body


def _int_divmod(k: TileOps, x: Any, y: Any, trunc: bool) -> tuple[Any, Any]:
    """(q, r) int32 tiles with x = q*y + r exactly: floor division (r has y's sign) or trunc
    division (r has x's sign)."""
    r_f = k.tmp(name="idiv_rcp")
    k.ts(r_f, y, nl.reciprocal)
    est = k.tmp(name="idiv_est")
    k.tt(est, x, r_f, nl.multiply)
    q = k.tmp(I32, "idiv_q")
    k.copy(q, est)  # round to nearest
    t = k.tmp(I32, "idiv_t")
    rem = k.tmp(I32, "idiv_rem")

    def remainder():
        k.tt(t, q, y, nl.multiply, GPSIMD)
        k.tt(rem, x, t, nl.subtract, GPSIMD)

    remainder()
    k.tt(est, rem, r_f, nl.multiply)  # refine with the exact remainder
    k.copy(t, est)
    k.tt(q, q, t, nl.add, GPSIMD)
    remainder()  # now |rem| <= |y|/2
    fix = k.tmp(I32, "idiv_fix")
    # floor: where rem and y have opposite signs, q -= 1 and rem += y
    k.tt(est, rem, y, nl.multiply)
    k.ts(fix, est, nl.less, 0.0)
    k.tt(q, q, fix, nl.subtract, GPSIMD)
    k.tt(t, fix, y, nl.multiply, GPSIMD)
    k.tt(rem, rem, t, nl.add, GPSIMD)
    if trunc:  # towards zero: where the floor quotient is negative and not exact, q += 1
        k.ts(est, rem, nl.not_equal, 0.0)
        k.stt(est, q, nl.less, 0.0, nl.multiply, est)
        k.copy(fix, est)
        k.tt(q, q, fix, nl.add, GPSIMD)
        k.tt(t, fix, y, nl.multiply, GPSIMD)
        k.tt(rem, rem, t, nl.subtract, GPSIMD)
    return q, rem


def _div_int(k, dst, v, a):
    mode = a["rounding_mode"]
    if mode is None:
        fail(
            "pointwise(div): rounding_mode=None (true division) has a floating-point result; "
            "pass a float output, or rounding_mode='trunc' / 'floor' for integer outputs"
        )
    x, y = _xy(v)
    q, _ = _int_divmod(k, _iv(k, x), _iv(k, y), trunc=mode == "trunc")
    k.copy(dst, q, VECTOR)


def _mod_int(trunc: bool):
    def body(k, dst, v, a):
        x, y = _xy(v)
        _, r = _int_divmod(k, _iv(k, x), _iv(k, y), trunc)
        k.copy(dst, r, VECTOR)

    return body


def _pow(k, dst, v, a):
    x, e = v["input"], v["exponent"]
    if is_tile(x) and is_tile(e):
        k.tt(dst, x, e, nl.power, GPSIMD)  # nl.power runs on GpSimd (nki-api.md §8.1)
    elif is_tile(x):
        k.ts(dst, x, nl.power, float(e))
    else:
        k.ts(dst, e, nl.power, float(x), rev0=True)


def _atan2(k, dst, v, a):
    """atan2(y, x) from arctan on [0, 1] (inside its valid range [-pi/2, pi/2]), then the octant,
    quadrant and sign fixes; the signs (of -0 and -inf too) come from the sign bits."""
    y, x = _xy(v)
    ax, ay = k.tmp(name="at_ax"), k.tmp(name="at_ay")
    k.ts(ax, x, nl.abs, None, nl.minimum, 3.4028234663852886e38)  # inf/inf -> 1
    k.ts(ay, y, nl.abs, None, nl.minimum, 3.4028234663852886e38)
    hi, lo = k.tmp(name="at_hi"), k.tmp(name="at_lo")
    k.tt(hi, ax, ay, nl.maximum)
    k.tt(lo, ax, ay, nl.minimum)
    k.ts(hi, hi, nl.maximum, 2.0**-126, nl.reciprocal)  # 0/0 -> 0
    k.tt(lo, lo, hi, nl.multiply)
    ang = k.tmp(name="at_ang")
    k.act(ang, nl.arctan, lo)
    swap = k.tmp(nl.uint8, "at_swap")
    k.tt(swap, ay, ax, nl.greater)
    k.ts(hi, ang, nl.multiply, -1.0, nl.add, HALF_PI)
    k.overwrite(ang, swap, hi)
    neg = _sign_bit(k, x)  # x < 0 or x = -0
    k.ts(hi, ang, nl.multiply, -1.0, nl.add, math.pi)
    k.overwrite(ang, neg, hi)
    k.ts(lo, _sign_bit(k, y), nl.multiply, -2.0, nl.add, 1.0)  # -1 where y < 0 or y = -0
    k.tt(dst, ang, lo, nl.multiply)


def _sign_bit(k: TileOps, x: Any) -> Any:
    """A uint8 tile of x's sign bits (1 for negatives, -0, -inf): a bitvec shift of the bits."""
    bits = {4: nl.int32, 2: nl.int16}[x.dtype.itemsize]
    p = k.tmp(nl.uint8, "sign_bit")
    k.ts(p, x.view(bits), nl.right_shift, 8 * x.dtype.itemsize - 1, nl.bitwise_and, 1)
    return p


# ---------------------------------------------------------------- references


def _r2(fn):
    return lambda v, a: fn(v["input"], v["other"])


def _div_ref(v, a):
    x, y = v["input"], v["other"]
    mode = a["rounding_mode"]
    q = np.true_divide(x, y)
    return q if mode is None else (np.floor(q) if mode == "floor" else np.trunc(q))


def _b(
    name: str,
    fbody,
    ibody,
    ref,
    attrs=None,
    temps: int = 1,
    result: str = "same",
    args=("input", "other"),
    scalars=("other",),
) -> OpSpec:
    return OpSpec(name, args, fbody, ibody, ref, dict(attrs or {}), temps, scalars, result)


_CMP = {
    "eq": (nl.equal, np.equal),
    "ne": (nl.not_equal, np.not_equal),
    "lt": (nl.less, np.less),
    "le": (nl.less_equal, np.less_equal),
    "gt": (nl.greater, np.greater),
    "ge": (nl.greater_equal, np.greater_equal),
}
_LOGIC = {
    "logical_and": (nl.logical_and, np.logical_and),
    "logical_or": (nl.logical_or, np.logical_or),
    "logical_xor": (nl.logical_xor, np.logical_xor),
}
_BITS = {
    "bitwise_and": (nl.bitwise_and, np.bitwise_and),
    "bitwise_or": (nl.bitwise_or, np.bitwise_or),
    "bitwise_xor": (nl.bitwise_xor, np.bitwise_xor),
}

BINARY = (
    _b("add", _add, _add_int, lambda v, a: v["input"] + a["alpha"] * v["other"], {"alpha": 1}),
    _b("sub", _sub, _sub_int, lambda v, a: v["input"] - a["alpha"] * v["other"], {"alpha": 1}),
    _b(
        "rsub",
        _rsub,
        _rsub_int,
        lambda v, a: v["other"] - a["alpha"] * v["input"],
        {"alpha": 1},
        temps=1,
    ),
    _b("mul", _binop(nl.multiply), _binop_int(nl.multiply), _r2(np.multiply)),
    _b("div", _div, _div_int, _div_ref, {"rounding_mode": None}, temps=13),
    _b(
        "remainder",
        _remainder_like("floor"),
        _mod_int(False),
        _r2(lambda x, y: x - y * np.floor(x / y)),
        temps=13,
    ),
    _b("fmod", _remainder_like("trunc"), _mod_int(True), _r2(np.fmod), temps=14),
    _b(
        "pow",
        _pow,
        _pow,
        lambda v, a: np.power(v["input"], v["exponent"]),
        args=("input", "exponent"),
        scalars=("input", "exponent"),
    ),
    _b("maximum", _binop(nl.maximum), _binop_int(nl.maximum), _r2(np.maximum)),
    _b("minimum", _binop(nl.minimum), _binop_int(nl.minimum), _r2(np.minimum)),
    _b("atan2", _atan2, None, _r2(np.arctan2), temps=7),
    *(_b(n, _binop(op), _binop_int(op), _r2(ref), result="bool") for n, (op, ref) in _CMP.items()),
    *(_b(n, _binop(op), _binop(op), _r2(ref), result="bool") for n, (op, ref) in _LOGIC.items()),
    *(_b(n, None, _binop_int(op, VECTOR), _r2(ref)) for n, (op, ref) in _BITS.items()),
)
register(*BINARY)
