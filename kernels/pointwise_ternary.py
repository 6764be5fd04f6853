"""The pointwise op table, part 3: ternary ops (where, masked_fill, addcmul, addcdiv, lerp),
each with its tile bodies and float64 numpy reference.

Layer: kernel library (trnsim.kernels); NKI API only. Selections are select_reduce (a scalar
alternative) or a copy followed by a predicated copy, so no 0/1 multiply turns an inf or nan
of the unselected operand into nan.
"""

from __future__ import annotations

import numpy as np

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

from . import _pw_math as M
from ._pw_tile import GPSIMD, I32, OpSpec, is_tile, register
from ._pw_tile import wrap32 as _wrap32

# ---------------------------------------------------------------- selection, fused


def _where(k, dst, v, a):
    c, x, y = v["condition"], v["input"], v["other"]
    if is_tile(x) and not is_tile(y) and dst.dtype.is_float and x.dtype.name != "int32":
        k.select(dst, c, x, y)
        return
    if is_tile(y) and not is_tile(x) and dst.dtype.is_float and y.dtype.name != "int32":
        nisa.select_reduce(dst=dst, predicate=c, on_true=y, on_false=float(x), reverse_pred=True)
        return
    if is_tile(y):
        k.copy(dst, y)
    else:
        nisa.memset(dst=dst, value=float(y) if dst.dtype.is_float else _wrap32(y))
    k.overwrite(dst, c, M.like(k, dst, x) if is_tile(x) else x)


def _masked_fill(k, dst, v, a):
    x, m, val = v["input"], v["mask"], v["value"]
    k.copy(dst, x)
    k.overwrite(dst, m, M.like(k, dst, val) if is_tile(val) else val)


def _addcmul(k, dst, v, a):
    t = k.tmp(name="acm_t")
    k.tt(t, v["tensor1"], v["tensor2"], nl.multiply)
    k.stt(dst, t, nl.multiply, float(a["value"]), nl.add, v["input"])


def _addcmul_int(k, dst, v, a):
    t = k.tmp(I32, "acm_t")
    k.tt(t, v["tensor1"], v["tensor2"], nl.multiply, GPSIMD)
    if int(a["value"]) != 1:
        k.tt(t, t, k.iconst(_wrap32(a["value"])), nl.multiply, GPSIMD)
    k.tt(dst, v["input"], t, nl.add, GPSIMD)


def _addcdiv(k, dst, v, a):
    t = k.tmp(name="acd_t")
    k.ts(t, v["tensor2"], nl.reciprocal)
    k.tt(t, v["tensor1"], t, nl.multiply)
    k.stt(dst, t, nl.multiply, float(a["value"]), nl.add, v["input"])


def _lerp(k, dst, v, a):
    """PyTorch's lerp: |w| < 0.5 ? self + w*(end-self) : end - (end-self)*(1-w)."""
    x, e, w = v["input"], v["end"], v["weight"]
    d = k.tmp(name="lerp_d")
    k.tt(d, e, x, nl.subtract)
    if not is_tile(w):
        w = float(w)
        if abs(w) < 0.5:
            k.stt(dst, d, nl.multiply, w, nl.add, x)
        else:
            k.stt(dst, d, nl.multiply, -(1.0 - w), nl.add, e)
        return
    lo = k.tmp(dst.dtype, "lerp_lo")
    t = k.tmp(name="lerp_t")
    k.tt(t, d, w, nl.multiply)
    k.tt(lo, x, t, nl.add)
    k.ts(t, w, nl.multiply, -1.0, nl.add, 1.0)
    k.tt(t, d, t, nl.multiply)
    k.tt(dst, e, t, nl.subtract)
    small = k.pred(w, nl.less, 0.5, op0=nl.abs)
    k.overwrite(dst, small, lo)


def _lerp_ref(v, a):
    x, e, w = v["input"], v["end"], v["weight"]
    return np.where(np.abs(w) < 0.5, x + w * (e - x), e - (e - x) * (1 - w))


def _where_ref(v, a):
    return np.where(v["condition"], v["input"], v["other"])


def _masked_fill_ref(v, a):
    return np.where(v["mask"], v["value"], v["input"])


TERNARY = (
    OpSpec(
        "where",
        ("condition", "input", "other"),
        _where,
        _where,
        _where_ref,
        {},
        1,
        ("input", "other"),
        predicates=("condition",),
    ),
    OpSpec(
        "masked_fill",
        ("input", "mask", "value"),
        _masked_fill,
        _masked_fill,
        _masked_fill_ref,
        {},
        1,
        ("value",),
        predicates=("mask",),
    ),
    OpSpec(
        "addcmul",
        ("input", "tensor1", "tensor2"),
        _addcmul,
        _addcmul_int,
        lambda v, a: v["input"] + a["value"] * v["tensor1"] * v["tensor2"],
        {"value": 1},
        1,
    ),
    OpSpec(
        "addcdiv",
        ("input", "tensor1", "tensor2"),
        _addcdiv,
        None,
        lambda v, a: v["input"] + a["value"] * v["tensor1"] / v["tensor2"],
        {"value": 1},
        1,
    ),
    OpSpec("lerp", ("input", "end", "weight"), _lerp, None, _lerp_ref, {}, 3, ("weight",)),
)
register(*TERNARY)
