"""nki.language convenience wrappers, reductions and composites: sum/max/min/prod/all/mean/
var over trailing free axes, softmax, rms_norm (VectorE / ScalarE instruction sequences)."""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from trnsim import dtypes as _dt
from trnsim.errors import ConstraintError
from trnsim.nki._isa_base import language_function
from trnsim.nki.lang_ops import (
    _col,
    _flat2d,
    _isa,
    _new,
    _nl,
    _tile,
    add,
    exp,
    logical_and,
    maximum,
    minimum,
    multiply,
    rsqrt,
    square,
)
from trnsim.nki.tensor import NkiTensor

__all__ = [
    "all",
    "average",
    "max",
    "mean",
    "min",
    "prod",
    "rms_norm",
    "softmax",
    "sum",
    "var",
]


# ---------------------------------------------------------------- reductions
def _axes(x: NkiTensor, axis: Any, fn: str) -> tuple[int, ...]:
    if axis is None:
        raise ConstraintError(f"nl.{fn}: axis is required (free axes of the tile)")
    raw = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    axes = tuple(sorted(int(a) % x.ndim if int(a) < 0 else int(a) for a in raw))
    if 0 in axes or builtins.any(a >= x.ndim for a in axes):
        raise ConstraintError(
            f"nl.{fn}: axis {axis} must name free axes 1..{x.ndim - 1} of a "
            f"{x.ndim}-D tile (axis 0 is the partition axis)"
        )
    if axes != tuple(range(x.ndim - len(axes), x.ndim)):
        raise ConstraintError(
            f"nl.{fn}: axis {axis} must be the last contiguous axes of the tile ([1], [1, 2], ...)"
        )
    return axes


def _reduced_shape(x: NkiTensor, axes: tuple[int, ...], keepdims: bool) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if d in axes else n for d, n in enumerate(x.shape))
    return tuple(n for d, n in enumerate(x.shape) if d not in axes)


def _reduce(
    fn: str, op: Any, x: Any, axis: Any, dtype: Any, keepdims: bool, negate: bool = False
) -> NkiTensor:
    x = _tile(x, fn)
    axes = _axes(x, axis, fn)
    out = _new(_reduced_shape(x, axes, keepdims), dtype or x.dtype, fn)
    _isa().tensor_reduce(dst=out, op=op, data=x, axis=axes, negate=negate, keepdims=keepdims)
    return out


@language_function
def sum(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False) -> NkiTensor:
    """Sum over trailing free axes (VectorE tensor_reduce)."""
    return _reduce("sum", add, x, axis, dtype, keepdims)


@language_function
def max(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False) -> NkiTensor:
    """Maximum over trailing free axes."""
    return _reduce("max", maximum, x, axis, dtype, keepdims)


@language_function
def min(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False) -> NkiTensor:
    """Minimum over trailing free axes."""
    return _reduce("min", minimum, x, axis, dtype, keepdims)


@language_function
def prod(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False) -> NkiTensor:
    """Product over trailing free axes."""
    return _reduce("prod", multiply, x, axis, dtype, keepdims)


@language_function
def all(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False) -> NkiTensor:
    """Logical AND over trailing free axes (1 if every element is non-zero)."""
    return _reduce("all", logical_and, x, axis, dtype, keepdims)


@language_function
def mean(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False) -> NkiTensor:
    """Mean over trailing free axes: an fp32 sum, then a scale by 1/n."""
    x = _tile(x, "mean")
    axes = _axes(x, axis, "mean")
    n = int(np.prod([x.shape[a] for a in axes]))
    total = _reduce("mean", add, x, axes, _dt.float32, keepdims)
    out = _new(total.shape, dtype or x.dtype, "mean")
    _isa().tensor_scalar(dst=out, data=total, op0=multiply, operand0=1.0 / n)
    return out


@language_function
def average(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False) -> NkiTensor:
    """Mean (also the `average` reduce-op constant of nisa.tensor_partition_reduce)."""
    return mean(x, axis, dtype, keepdims)


@language_function
def var(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False) -> NkiTensor:
    """Population variance over trailing free axes (result keeps the reduced axes).

    Over all free axes of a tile this is bn_stats (chunks of bn_stats_fmax) + bn_aggr;
    otherwise mean(x*x) - mean(x)**2 from VectorE reductions.
    """
    x = _tile(x, "var")
    axes = _axes(x, axis, "var")
    nisa = _isa()
    shape = _reduced_shape(x, axes, True)
    out = _new(shape, dtype or x.dtype, "var")
    flat = _flat2d(x) if len(axes) == x.ndim - 1 else None
    if flat is not None and flat.ndim == 2:
        p, f = flat.shape
        fmax = _nl().tile_size.bn_stats_fmax
        chunks = -(-f // fmax)
        stats = _new((p, 6 * chunks), _dt.float32, "var")
        for c in range(chunks):
            nisa.bn_stats(
                dst=stats[:, 6 * c : 6 * c + 6],
                data=flat[:, c * fmax : builtins.min(f, (c + 1) * fmax)],
            )
        agg = _new((p, 2), _dt.float32, "var")
        nisa.bn_aggr(dst=agg, data=stats)
        nisa.tensor_copy(dst=out.reshape((p, 1)), src=agg[:, 1:2])
        return out
    n = float(np.prod([x.shape[a] for a in axes]))
    sq = _new(x.shape, _dt.float32, "var")
    nisa.tensor_tensor(dst=sq, data1=x, data2=x, op=multiply)
    s1 = _reduce("var", add, x, axes, _dt.float32, True)
    s2 = _reduce("var", add, sq, axes, _dt.float32, True)
    m2 = _new(shape, _dt.float32, "var")
    nisa.tensor_tensor(dst=m2, data1=s1, data2=s1, op=multiply)  # sum^2
    # var = s2/n - (s1/n)^2 = (s2 - sum^2/n) / n
    nisa.scalar_tensor_tensor(
        dst=m2, data=m2, op0=multiply, operand0=-1.0 / n, op1=add, operand1=s2
    )
    nisa.tensor_scalar(dst=out, data=m2, op0=multiply, operand0=1.0 / n)
    return out


# ---------------------------------------------------------------- composites
@language_function
def softmax(x: Any, axis: Any = -1, dtype: Any = None) -> NkiTensor:
    """exp(x - max) / sum(exp(x - max)) over trailing free axes.

    Lowering: tensor_reduce(max, negate) -> activation(exp, bias=-max, accumulate the sum)
    -> reciprocal -> tensor_scalar multiply (per-partition scale).
    """
    x = _tile(x, "softmax")
    axes = _axes(x, axis, "softmax")
    nisa = _isa()
    if len(axes) == x.ndim - 1:
        x2 = _flat2d(x)
        p = x.shape[0]
        neg_max = _new((p, 1), _dt.float32, "softmax")
        nisa.tensor_reduce(dst=neg_max, op=maximum, data=x2, axis=(1,), negate=True, keepdims=True)
        e = _new(x2.shape, _dt.float32, "softmax")
        total = _new((p, 1), _dt.float32, "softmax")
        nisa.activation(
            dst=e,
            op=exp,
            data=x2,
            bias=neg_max,
            reduce_op=add,
            reduce_res=total,
            reduce_cmd=nisa.reduce_cmd.reset_reduce,
        )
        inv = _new((p, 1), _dt.float32, "softmax")
        nisa.reciprocal(dst=inv, data=total)
        out = _new(x.shape, dtype or x.dtype, "softmax")
        nisa.tensor_scalar(dst=_flat2d(out), data=e, op0=multiply, operand0=inv)
        return out
    kshape = _reduced_shape(x, axes, True)
    neg_max = _reduce("softmax", maximum, x, axes, _dt.float32, True, negate=True)
    shifted = _new(x.shape, _dt.float32, "softmax")
    nisa.tensor_tensor(dst=shifted, data1=x, data2=_expand(neg_max, x.shape), op=add)
    e = _new(x.shape, _dt.float32, "softmax")
    nisa.activation(dst=e, op=exp, data=shifted)
    total = _reduce("softmax", add, e, axes, _dt.float32, True)
    inv = _new(kshape, _dt.float32, "softmax")
    nisa.reciprocal(dst=inv, data=total)
    out = _new(x.shape, dtype or x.dtype, "softmax")
    nisa.tensor_tensor(dst=out, data1=e, data2=_expand(inv, x.shape), op=multiply)
    return out


def _expand(t: NkiTensor, shape: tuple[int, ...]) -> NkiTensor:
    for d, (have, want) in enumerate(zip(t.shape, shape, strict=True)):
        if have != want:
            t = t.broadcast(d, want)
    return t


@language_function
def rms_norm(
    x: Any,
    w: Any,
    axis: Any,
    n: int,
    epsilon: float = 1e-6,
    dtype: Any = None,
    compute_dtype: Any = None,
) -> NkiTensor:
    """x / sqrt(sum(x**2) / n + epsilon) * w over trailing free axes.

    Lowering: activation(square, accumulate the row sum) -> tensor_scalar(* 1/n, + eps)
    -> activation(rsqrt) -> scalar_tensor_tensor(x * r * w).
    """
    x = _tile(x, "rms_norm")
    w = _tile(w, "rms_norm", "w")
    axes = _axes(x, axis, "rms_norm")
    if len(axes) != x.ndim - 1:
        raise ConstraintError(f"nl.rms_norm: axis {axis} must cover every free axis of the tile")
    nisa = _isa()
    x2 = _flat2d(x)
    p = x.shape[0]
    sq = _new(x2.shape, compute_dtype or _dt.float32, "rms_norm")
    ss = _new((p, 1), _dt.float32, "rms_norm")
    nisa.activation(
        dst=sq,
        op=square,
        data=x2,
        reduce_op=add,
        reduce_res=ss,
        reduce_cmd=nisa.reduce_cmd.reset_reduce,
    )
    nisa.tensor_scalar(
        dst=ss, data=ss, op0=multiply, operand0=1.0 / float(n), op1=add, operand1=float(epsilon)
    )
    r = _new((p, 1), _dt.float32, "rms_norm")
    nisa.activation(dst=r, op=rsqrt, data=ss)
    out = _new(x.shape, dtype or x.dtype, "rms_norm")
    if tuple(w.shape) == tuple(x.shape):
        nisa.scalar_tensor_tensor(
            dst=_flat2d(out), data=x2, op0=multiply, operand0=r, op1=multiply, operand1=_flat2d(w)
        )
    elif _col(w) and w.shape[0] == p:
        nisa.tensor_scalar(
            dst=_flat2d(out), data=x2, op0=multiply, operand0=r, op1=multiply, operand1=w
        )
    else:
        raise ConstraintError(
            f"nl.rms_norm: w has shape {list(w.shape)}; it must match x "
            f"{list(x.shape)} (or be a (P, 1) per-partition weight)"
        )
    return out
