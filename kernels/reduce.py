"""Reductions over any subset of the axes of a strided tensor (the device kernels of aten.sum,
mean, prod, amax, amin, all, any, count_nonzero, linalg_vector_norm, logsumexp, var, std and
var_mean), with float64 references.

Layer: kernel library (trnsim.kernels); written against the public NKI API only.

Two layouts (`_plan`):

* **rows** (at least 64 outputs, or short reductions): the kept axes are rows on partitions
  (`_rows.RowSpace`, G rows per partition when rows are short), the reduced axes the free axis
  (`_boxes.Group`, one DMA per box of at most 4096 elements); each box reduces to a partial
  state slot, the slots of a row combine once at the end.
* **columns** (fewer than 64 outputs and a long reduction, e.g. a full reduction): the reduced
  axes are spread over all 128 partitions (G consecutive elements per partition), the kept
  axes along the free axis; each tile reduces its G elements per partition into a slot, the
  slots combine per partition, and the 128 partials fold into partition 0 (GpSimd
  tensor_partition_reduce for sums and maxima, otherwise one SBUF->SBUF DMA and a free-axis
  combine).

The arithmetic of each reduction lives in `_reduce_ops` (states, leaf, combine, fold, finish).
"""

from __future__ import annotations

import math

import numpy as np

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

from . import _intops as io
from . import _reduce_ops as rops
from ._boxes import Group, hbm
from ._common import fail
from ._rows import MIN_DMA_BYTES, P_MAX, Operand, Prefetch, RowSpace

DTYPES = ("float32", "bfloat16", "float16", "int32", "int16", "int8", "uint8", "bool")
FLOATS = ("float32", "bfloat16", "float16")
TILE_ELEMS = 4096  # elements per partition of one data tile (16 KiB of fp32 temporaries)
COLUMN_MAX_OUTPUTS = 64  # at most this many outputs use the columns layout
COLUMN_MIN_REDUCED = 2048  # ... when each reduces at least this many elements


# ---------------------------------------------------------------- arguments
class Tensor:
    """A kernel argument: its logical view (an int64 pair view's low words) and whether it is
    an int64 pair view (docs/device-kernels.md)."""

    def __init__(self, view, pair: bool):
        self.full = view
        self.pair = pair
        self.view = view.select(len(view.shape) - 1, 0) if pair else view
        self.shape = tuple(int(s) for s in self.view.shape)
        self.dtype = "int64" if pair else str(view.dtype)


def _tensor(what: str, name: str, view, int64) -> Tensor:
    pair = name in tuple(int64)
    if pair and (str(view.dtype) != "int32" or view.shape[-1] != 2):
        fail(f"{what}: {name} is named in int64= but is not an int32 pair view [..., 2] "
             f"(shape {list(view.shape)}, dtype {view.dtype})")
    t = Tensor(view, pair)
    if not pair and t.dtype not in DTYPES:
        fail(f"{what}: {name} dtype {t.dtype} is not one of {', '.join(DTYPES)} (or int64)")
    return t


def _dims(what: str, dims, rank: int) -> tuple[int, ...]:
    items = list(range(rank)) if dims is None else (
        [dims] if isinstance(dims, int) else list(dims))
    if not items:
        items = list(range(rank))  # torch: dim=[] reduces every axis
    out = []
    for d in items:
        if not isinstance(d, (int, np.integer)) or not -rank <= d < rank:
            fail(f"{what}: dims={dims!r} has {d!r}, outside [-{rank}, {rank}) for a "
                 f"{rank}-d tensor")
        out.append(int(d) % rank)
    if len(set(out)) != len(out):
        fail(f"{what}: dims={dims!r} names an axis twice")
    return tuple(sorted(out))


def _check_out(what: str, name: str, out: Tensor, x: Tensor, dims: tuple[int, ...]) -> None:
    want = tuple(1 if a in dims else n for a, n in enumerate(x.shape))
    if out.shape != want:
        fail(f"{what}: {name} has shape {list(out.shape)}; reducing axes {list(dims)} of x "
             f"{list(x.shape)} needs {list(want)} (reduced axes kept with size 1)")


# ---------------------------------------------------------------- driver
def _run(what: str, op: rops.Op, outs: list[tuple[Tensor, rops.Op | None]], x: Tensor,
         dims: tuple[int, ...], correction: float = 0.0, std: bool = False) -> None:
    """Reduce x over `dims` into each out (an out with its own finishing op, e.g. the mean of
    var_mean, gets that op's result from the same states)."""
    is_int = x.dtype not in FLOATS
    if op.float_only and is_int:
        fail(f"{what}: x dtype {x.dtype} is not a floating-point dtype; torch computes "
             f"{op.name} only for floating-point tensors")
    exact = op.exact_int and is_int
    for out, _ in outs:
        _check_out(what, "out", out, x, dims)
    kept = [a for a in range(len(x.shape)) if a not in dims]
    n_out = math.prod(x.shape[a] for a in kept)
    n_red = math.prod(x.shape[a] for a in dims)
    if n_out <= COLUMN_MAX_OUTPUTS and n_red >= COLUMN_MIN_REDUCED:
        _columns(op, outs, x, kept, list(dims), exact, n_red, correction, std)
    else:
        _rows_layout(op, outs, x, kept, list(dims), exact, n_red, correction, std)


def _load_dtype(x: Tensor, exact: bool):
    return nl.int32 if exact else x.view.dtype


def _rows_layout(op, outs, x, kept, red, exact, n_red, correction, std) -> None:
    xv = x.view
    operands = {"x": Operand(xv, tuple(xv.strides[a] for a in kept), None)}
    for i, (o, _) in enumerate(outs):
        operands[f"out{i}"] = Operand(o.view, tuple(o.view.strides[a] for a in kept), None)
    space = RowSpace(tuple(x.shape[a] for a in kept), n_red, operands)
    cols = Group.of([xv], red)
    boxes = cols.boxes(TILE_ELEMS)
    g = 1
    if len(boxes) == 1:
        isz = max(1, xv.dtype.itemsize)
        g = min(-(-MIN_DMA_BYTES // (n_red * isz)), TILE_ELEMS // n_red,
                -(-space.n_rows // P_MAX))
    tiles = space.tiles(max(1, g))
    dtype = _load_dtype(x, exact)

    def load(req):
        tile, box = req
        t = rops.sbuf((tile.parts, tile.g, box.size), dtype, "x_tile")
        for blk in tile.blocks:
            nisa.dma_copy(dst=t[blk.p0 : blk.p0 + blk.parts],
                          src=hbm(xv, blk.patterns["x"], blk.offsets["x"], box))
        return t

    fetch = Prefetch([(tile, box) for tile in tiles for box in boxes], load)
    for tile in tiles:
        st = rops.new_state(op, tile.parts, tile.g, len(boxes), exact, fill=False)
        for k in range(len(boxes)):
            rops.leaf(op, fetch.next(), rops.slot(st, tile.parts, k), exact)
        res = rops.combine(op, st, exact)
        for i, (o, post) in enumerate(outs):
            r = _result(post or op, res, o, (tile.parts, tile.g), n_red, correction, exact, std)
            for blk in tile.blocks:
                pat = blk.patterns[f"out{i}"] + ([[1, 2]] if o.pair else [])
                nisa.dma_copy(dst=hbm(o.full, pat, blk.offsets[f"out{i}"]),
                              src=r[blk.p0 : blk.p0 + blk.parts])


def _columns(op, outs, x, kept, red, exact, n_red, correction, std) -> None:
    xv = x.view
    space = RowSpace(tuple(x.shape[a] for a in red), 1,
                     {"x": Operand(xv, tuple(xv.strides[a] for a in red), None)})
    cols = Group.of([xv] + [o.view for o, _ in outs], kept)
    dtype = _load_dtype(x, exact)
    for box in cols.boxes(TILE_ELEMS // 8):
        g = max(1, min(TILE_ELEMS // box.size, -(-n_red // P_MAX)))
        tiles = space.tiles(g)
        used = tiles[0].parts
        st = rops.new_state(op, used, box.size, len(tiles), exact, fill=True)

        def load(tile, box=box):
            t = rops.sbuf((tile.parts, tile.g, box.size), dtype, "x_tile")
            for blk in tile.blocks:
                nisa.dma_copy(dst=t[blk.p0 : blk.p0 + blk.parts],
                              src=hbm(xv, blk.patterns["x"], blk.offsets["x"], box, 0))
            return t

        fetch = Prefetch(tiles, load)
        for k, tile in enumerate(tiles):
            data = fetch.next().permute((0, 2, 1))  # [parts, outputs, G]
            rops.leaf(op, data, rops.slot(st, tile.parts, k), exact)
        res = rops.fold(op, rops.combine(op, st, exact), exact)
        for i, (o, post) in enumerate(outs):
            r = _result(post or op, res, o, (1, box.size), n_red, correction, exact, std)
            pat = box.pattern(i + 1) + ([[1, 2]] if o.pair else [])
            nisa.dma_copy(dst=o.full.ap(pat or [[1, 1]], offset=o.view.offset +
                                        box.offsets[i + 1]), src=r)


def _result(op, res, out: Tensor, shape, count, correction, exact, std):
    """The finished result as an SBUF tile of out's dtype ([..., 2] words for a pair)."""
    if out.pair or (exact and out.dtype == "int32"):
        r = rops.sbuf(shape, nl.int32, "res_i32")
        rops.finish(op, res, r, count, correction, exact, std)
        if not out.pair:
            return r
        words = rops.sbuf((*shape, 2), nl.int32, "res_i64")
        io.int64_words(words, r)
        return words
    r = rops.sbuf(shape, out.view.dtype, "res")
    rops.finish(op, res, r, count, correction, exact, std)
    return r


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
        on GpSimd (32-bit, wrapping modulo 2^32 as int32 arithmetic; an int64 result is the
        sign extension of that 32-bit value). amax/amin propagate NaN. torch refuses mean and
        norm of integer tensors, and so does this kernel.
    """
    what = f"reduce(op={op!r})"
    if op == "norm":
        spec = rops.NORMS.get(float(p))
        if spec is None:
            fail(f"{what}: p={p!r} is not supported (supported: 2, 1, inf, -inf, 0)")
    else:
        spec = rops.OPS.get(op)
        if spec is None:
            fail(f"{what}: op {op!r} is not supported (supported: "
                 f"{', '.join([*rops.OPS, 'norm'])})")
    xt = _tensor(what, "x", x, int64)
    ot = _tensor(what, "out", out, int64)
    _run(what, spec, [(ot, None)], xt, _dims(what, dims, len(xt.shape)))


def var(out, x, *, dims=None, correction: float = 1, int64=()) -> None:
    """out = variance of x over `dims` with `correction` (torch.var): sum((x - mean)^2) /
    max(N - correction, 0). Float x and out; statistics in fp32 (Chan's pairwise merge of the
    per-tile counts, means and squared deviations). Shapes as `reduce`."""
    xt, ot = _tensor("var", "x", x, int64), _tensor("var", "out", out, int64)
    _run("var", rops.VAR, [(ot, None)], xt, _dims("var", dims, len(xt.shape)), correction)


def std(out, x, *, dims=None, correction: float = 1, int64=()) -> None:
    """out = sqrt(var(x, dims, correction)) (torch.std). Shapes as `reduce`."""
    xt, ot = _tensor("std", "x", x, int64), _tensor("std", "out", out, int64)
    _run("std", rops.VAR, [(ot, None)], xt, _dims("std", dims, len(xt.shape)), correction,
         std=True)


def var_mean(var_out, mean_out, x, *, dims=None, correction: float = 1, std: bool = False,
             int64=()) -> None:
    """var_out = var(x) (std with std=True) and mean_out = mean(x) over `dims` from one pass
    (torch.var_mean / std_mean). Shapes as `reduce`."""
    what = "std_mean" if std else "var_mean"
    xt = _tensor(what, "x", x, int64)
    vt, mt = _tensor(what, "var_out", var_out, int64), _tensor(what, "mean_out", mean_out, int64)
    _run(what, rops.VAR, [(vt, None), (mt, rops.VAR_MEAN)], xt, _dims(what, dims, len(xt.shape)),
         correction, std=std)

# ---------------------------------------------------------------- references
def reduce_ref(x: np.ndarray, dims=None, op: str = "sum", p: float = 2) -> np.ndarray:
    """op over `dims` in float64 (keepdims), as torch defines it (NaN propagates in amax/amin;
    logsumexp of all -inf is -inf)."""
    a = np.asarray(x)
    axes = tuple(range(a.ndim)) if dims is None or dims == () else tuple(np.atleast_1d(dims))
    v = a.astype(np.float64)
    with np.errstate(all="ignore"):
        if op == "logsumexp":
            m = v.max(axis=axes, keepdims=True)
            m0 = np.where(np.isinf(m), 0.0, m)
            return np.log(np.exp(v - m0).sum(axis=axes, keepdims=True)) + m0
        if op == "norm":
            if p == 0:
                return (v != 0).sum(axis=axes, keepdims=True).astype(np.float64)
            if np.isinf(p):
                f = np.max if p > 0 else np.min
                return f(np.abs(v), axis=axes, keepdims=True)
            return (np.abs(v) ** p).sum(axis=axes, keepdims=True) ** (1.0 / p)
        table = {
            "sum": np.sum, "mean": np.mean, "prod": np.prod, "amax": np.max, "amin": np.min,
            "all": lambda t, **k: np.all(t != 0, **k), "any": lambda t, **k: np.any(t != 0, **k),
            "count_nonzero": lambda t, **k: np.sum(t != 0, **k),
        }
        return np.asarray(table[op](v, axis=axes, keepdims=True), dtype=np.float64)


def var_ref(x: np.ndarray, dims=None, correction: float = 1) -> np.ndarray:
    """torch.var in float64 (keepdims): sum((x - mean)^2) / max(N - correction, 0)."""
    v = np.asarray(x, dtype=np.float64)
    axes = tuple(range(v.ndim)) if dims is None or dims == () else tuple(np.atleast_1d(dims))
    n = math.prod(v.shape[a] for a in axes)
    with np.errstate(all="ignore"):
        dev = ((v - v.mean(axis=axes, keepdims=True)) ** 2).sum(axis=axes, keepdims=True)
        return dev / max(n - correction, 0)
