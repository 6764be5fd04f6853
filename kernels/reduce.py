"""Reductions over any subset of the axes of a strided tensor (the device kernels of aten.sum,
mean, prod, amax, amin, all, any, count_nonzero, linalg_vector_norm, logsumexp, var, std,
var_mean, max/min with indices, argmax and argmin), with float64 references.

Layer: kernel library (trnsim.kernels); written against the public NKI API only. The tile
layouts (kept axes on partitions, or a long reduction spread over all 128 partitions) are in
`_reduce_layout`; the arithmetic of each reduction as partial states in `_reduce_ops` and
`_arg_ops`.
"""

from __future__ import annotations

import math

import numpy as np

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

from . import _arg_ops as aops
from . import _intops as io
from . import _reduce_ops as rops
from . import _rowops as ro
from ._args import Tensor, axes
from ._common import fail
from ._int64 import store_int32_as_pairs
from ._reduce_layout import Reducer, run


# ---------------------------------------------------------------- arguments
def _check_out(what: str, name: str, out: Tensor, x: Tensor, dims: tuple[int, ...]) -> None:
    want = tuple(1 if a in dims else n for a, n in enumerate(x.shape))
    if out.shape != want:
        fail(
            f"{what}: {name} has shape {list(out.shape)}; reducing axes {list(dims)} of x "
            f"{list(x.shape)} needs {list(want)} (reduced axes kept with size 1)"
        )


# ---------------------------------------------------------------- reducers
class _States(Reducer):
    """sum/mean/.../var through _reduce_ops; `posts` finish each output (var_mean's mean)."""

    def __init__(
        self,
        op: rops.Op,
        outs: list[Tensor],
        exact: bool,
        count: int,
        correction: float = 0.0,
        std: bool = False,
        posts=None,
    ):
        self.op, self.outs, self.exact, self.count = op, outs, exact, count
        self.correction, self.std = correction, std
        self.posts = posts or [op] * len(outs)
        self.partition_fold = rops.partition_fold(op)

    def state(self, p, a, slots, fill):
        return rops.new_state(self.op, p, a, slots, self.exact, fill)

    def reset(self, st, k):
        rops.reset(self.op, st, k, self.exact)

    def leaf(self, data, d, pos):
        rops.leaf(self.op, data, d, self.exact)

    def combine(self, st):
        return rops.combine(self.op, st, self.exact)

    def fold(self, st):
        return rops.fold(self.op, st, self.exact)

    def results(self, res, shape):
        out = []
        for o, post in zip(self.outs, self.posts, strict=True):
            if post.kind == "sum64":  # the words of hi * 2^16 + lo
                w = ro.sbuf((*shape, 2), nl.int32, "res_i64")
                io.words16(w, res["lo"], res["hi"])
                out.append(w)
                continue
            as_int = o.pair or (self.exact and o.dtype == "int32")
            r = ro.sbuf(shape, nl.int32 if as_int else o.view.dtype, "res")
            rops.finish(post, res, r, self.count, self.correction, self.exact, self.std)
            out.append(_words(r) if o.pair else r)
        return out


def _words(r):
    w = ro.sbuf((*r.shape, 2), nl.int32, "res_i64")
    store_int32_as_pairs(r, w, io.GPSIMD)
    return w


def _run(
    what: str,
    op: rops.Op,
    outs: list[Tensor],
    x: Tensor,
    dims: tuple[int, ...],
    correction: float = 0.0,
    std: bool = False,
    posts=None,
) -> None:
    if op.float_only and not x.is_float:
        fail(
            f"{what}: x dtype {x.dtype} is not a floating-point dtype; torch computes "
            f"{op.name} only for floating-point tensors"
        )
    for o in outs:
        _check_out(what, "out", o, x, dims)
    count = math.prod(x.shape[a] for a in dims)
    exact = op.exact_int and not x.is_float
    run(_States(op, outs, exact, count, correction, std, posts), outs, x, dims)


# ---------------------------------------------------------------- kernels
def reduce(out, x, *, dims=None, op: str, p: float = 2, int64=()) -> None:
    """out = op(x) over the axes `dims`.

    Dimensions:
        x: any shape, any strides (zero included); out: x's shape with the reduced axes of
        size 1 (a keepdim=False result viewed so).

    Args:
        out: result. Float ops: any float dtype (cast once). sum/prod of integer or bool x:
            int32, or int64 (a pair view named in int64=). amax/amin: x's dtype.
            all/any: bool (or uint8).
        x: input, float32/bfloat16/float16/int32/int16/int8/uint8/bool, or int64 (pair view,
            read from its low words: values must lie in int32 range).
        dims: axes to reduce (int, sequence; None or [] = all axes).
        op: sum, mean, prod, amax, amin, all, any, count_nonzero, norm (with p = 2, 1, inf,
            -inf or 0), logsumexp.
        int64: names of the arguments ("x", "out") that are int64 pair views.

    Notes:
        Float inputs accumulate in fp32. Integer sums, products, maxima and minima are exact
        on GpSimd: a sum into int64 out is kept as two 16-bit-split words (exact while the
        sum of |x| is below 2^47); int32 sums and all products wrap modulo 2^32 as int32
        arithmetic does (an int64 product is the sign extension of that 32-bit value).
        amax/amin propagate NaN. torch refuses mean and norm of integer tensors, and so does
        this kernel.
    """
    what = f"reduce(op={op!r})"
    if op == "norm":
        spec = rops.NORMS.get(float(p))
        if spec is None:
            fail(f"{what}: p={p!r} is not supported (supported: 2, 1, inf, -inf, 0)")
    else:
        spec = rops.OPS.get(op)
        if spec is None:
            fail(
                f"{what}: op {op!r} is not supported (supported: {', '.join([*rops.OPS, 'norm'])})"
            )
    xt, ot = Tensor(what, "x", x, int64), Tensor(what, "out", out, int64)
    if op == "sum" and not xt.is_float and ot.pair:
        spec = rops.SUM64
    _run(what, spec, [ot], xt, axes(what, dims, len(xt.shape)))


def var(out, x, *, dims=None, correction: float = 1, int64=()) -> None:
    """out = variance of x over `dims` with `correction` (torch.var): sum((x - mean)^2) /
    max(N - correction, 0). Float x and out; statistics in fp32 (Chan's pairwise merge of the
    per-tile counts, means and squared deviations). Shapes as `reduce`."""
    xt, ot = Tensor("var", "x", x, int64), Tensor("var", "out", out, int64)
    _run("var", rops.VAR, [ot], xt, axes("var", dims, len(xt.shape)), correction)


def std(out, x, *, dims=None, correction: float = 1, int64=()) -> None:
    """out = sqrt(var(x, dims, correction)) (torch.std). Shapes as `reduce`."""
    xt, ot = Tensor("std", "x", x, int64), Tensor("std", "out", out, int64)
    _run("std", rops.VAR, [ot], xt, axes("std", dims, len(xt.shape)), correction, std=True)


def var_mean(
    var_out, mean_out, x, *, dims=None, correction: float = 1, std: bool = False, int64=()
) -> None:
    """var_out = var(x) (std with std=True) and mean_out = mean(x) over `dims` from one pass
    (torch.var_mean / std_mean). Shapes as `reduce`."""
    what = "std_mean" if std else "var_mean"
    xt = Tensor(what, "x", x, int64)
    vt, mt = Tensor(what, "var_out", var_out, int64), Tensor(what, "mean_out", mean_out, int64)
    _run(
        what,
        rops.VAR,
        [vt, mt],
        xt,
        axes(what, dims, len(xt.shape)),
        correction,
        std=std,
        posts=[rops.VAR, rops.VAR_MEAN],
    )


class _Arg(Reducer):
    """argmax / argmin through _arg_ops."""

    needs_pos = True

    def __init__(self, alu, values: Tensor | None, indices: Tensor, exact: bool):
        self.alu, self.values, self.indices, self.exact = alu, values, indices, exact

    def state(self, p, a, slots, fill):
        st = {
            "v": ro.sbuf((p, a, slots), nl.int32 if self.exact else nl.float32, "arg_v"),
            "i": ro.sbuf((p, a, slots), nl.float32, "arg_i"),
        }
        if fill:
            self._fill(st["v"], st["i"])
        return st

    def reset(self, st, k):
        self._fill(st["v"][:, :, k], st["i"][:, :, k])

    def _fill(self, v, i) -> None:
        """Empty slots lose every comparison and every tie."""
        big = self.alu is nl.maximum
        if self.exact:
            nisa.memset(dst=v, value=rops.INT_MIN if big else rops.INT_MAX)
        else:
            nisa.memset(dst=v, value=-math.inf if big else math.inf)
        nisa.memset(dst=i, value=aops.BIG - 1)

    def leaf(self, data, d, pos):
        aops.select(data, pos, d["v"], d["i"], self.alu, self.exact)

    def combine(self, st):
        return aops.combine(st, self.alu, self.exact)

    def fold(self, st):
        return aops.fold(st, self.alu, self.exact)

    def results(self, res, shape):
        out = []
        if self.values is not None:
            o = self.values
            r = ro.sbuf(shape, nl.int32 if o.pair else o.view.dtype, "values")
            (io.copy if self.exact else nisa.tensor_copy)(dst=r, src=res["v"])
            out.append(_words(r) if o.pair else r)
        idx = ro.sbuf(shape, nl.int32, "indices")
        nisa.tensor_copy(dst=idx, src=res["i"])
        out.append(_words(idx))
        return out


def arg_reduce(values, indices, x, *, dim=None, op: str, int64=()) -> None:
    """values, indices = max (op="max") or min (op="min") of x along `dim` and the index of
    its first occurrence (torch.max/min(dim) and argmax/argmin; dim=None: over the flattened
    tensor, as argmax(x)).

    Dimensions:
        x: any shape, any strides; values/indices: x's shape with `dim` of size 1 (dim=None:
        shape (1,)).

    Args:
        values: x's dtype, or None (argmax / argmin).
        indices: int64 (an int32 pair view [..., 2]; always int64, need not be named).
        x: float32/bfloat16/float16/int32/int16/int8/uint8/bool, or int64 (pair view named
            in int64=, read from its low words).
        dim: the axis (negative allowed), or None.
        op: "max" or "min".

    Notes:
        Ties resolve to the first occurrence and NaN counts as the extreme value (its first
        index wins), as on torch CPU. Floats compare in fp32; integer values exactly on
        GpSimd. Positions are computed in fp32, so at most 2^24 elements per reduction.
    """
    what = f"arg_reduce(op={op!r})"
    if op not in ("max", "min"):
        fail(f"{what}: op must be 'max' or 'min'")
    xt = Tensor(what, "x", x, int64)
    it = Tensor(what, "indices", indices, ("indices",))
    vt = None if values is None else Tensor(what, "values", values, int64)
    rank = len(xt.shape)
    dims = tuple(range(rank)) if dim is None else axes(what, dim, rank)
    if len(dims) != 1 and dim is not None:
        fail(f"{what}: dim must be one axis or None, got {dim!r}")
    count = math.prod(xt.shape[a] for a in dims)
    if count > aops.MAX_POSITIONS:
        fail(
            f"{what}: {count} elements along the reduction; positions are exact in fp32 "
            f"only up to 2^24 ({aops.MAX_POSITIONS})"
        )
    outs = [t for t in (vt, it) if t is not None]
    for name, o in zip(("values", "indices")[2 - len(outs) :], outs, strict=True):
        if dim is None:
            if math.prod(o.shape) != 1:
                fail(f"{what}: {name} has shape {list(o.shape)}; dim=None needs one element")
        else:
            _check_out(what, name, o, xt, dims)
    alu = nl.maximum if op == "max" else nl.minimum
    run(_Arg(alu, vt, it, not xt.is_float), outs, xt, dims)


# ---------------------------------------------------------------- references
def reduce_ref(x: np.ndarray, dims=None, op: str = "sum", p: float = 2) -> np.ndarray:
    """op over `dims` in float64 (keepdims), as torch defines it (NaN propagates in amax/amin;
    logsumexp of all -inf is -inf)."""
    a = np.asarray(x)
    ax = tuple(range(a.ndim)) if dims is None or dims == () else tuple(np.atleast_1d(dims))
    v = a.astype(np.float64)
    with np.errstate(all="ignore"):
        if op == "logsumexp":
            m = v.max(axis=ax, keepdims=True)
            m0 = np.where(np.isinf(m), 0.0, m)
            return np.log(np.exp(v - m0).sum(axis=ax, keepdims=True)) + m0
        if op == "norm":
            if p == 0:
                return (v != 0).sum(axis=ax, keepdims=True).astype(np.float64)
            if np.isinf(p):
                f = np.max if p > 0 else np.min
                return f(np.abs(v), axis=ax, keepdims=True)
            return (np.abs(v) ** p).sum(axis=ax, keepdims=True) ** (1.0 / p)
        table = {
            "sum": np.sum,
            "mean": np.mean,
            "prod": np.prod,
            "amax": np.max,
            "amin": np.min,
            "all": lambda t, **k: np.all(t != 0, **k),
            "any": lambda t, **k: np.any(t != 0, **k),
            "count_nonzero": lambda t, **k: np.sum(t != 0, **k),
        }
        return np.asarray(table[op](v, axis=ax, keepdims=True), dtype=np.float64)


def var_ref(x: np.ndarray, dims=None, correction: float = 1) -> np.ndarray:
    """torch.var in float64 (keepdims): sum((x - mean)^2) / max(N - correction, 0)."""
    v = np.asarray(x, dtype=np.float64)
    ax = tuple(range(v.ndim)) if dims is None or dims == () else tuple(np.atleast_1d(dims))
    n = math.prod(v.shape[a] for a in ax)
    with np.errstate(all="ignore"):
        dev = ((v - v.mean(axis=ax, keepdims=True)) ** 2).sum(axis=ax, keepdims=True)
        return dev / max(n - correction, 0)


def arg_reduce_ref(x: np.ndarray, dim=None, op: str = "max") -> tuple[np.ndarray, np.ndarray]:
    """(values, indices) with keepdims (dim=None: shape (1,)): numpy's argmax/argmin take the
    first occurrence and treat NaN as the extreme value, as torch CPU does."""
    a = np.asarray(x)
    v = a.reshape(-1) if dim is None else a
    axis = 0 if dim is None else dim % a.ndim
    idx = np.expand_dims((np.argmax if op == "max" else np.argmin)(v, axis=axis), axis)
    vals = np.take_along_axis(v, idx, axis=axis)
    return vals, idx.astype(np.int64)
