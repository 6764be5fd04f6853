"""Shared pieces of the loss device kernels (kernels/losses.py): argument checks, the row
space of [N, C] inputs with int64-pair targets, the one-hot selection of each row's target
class, and the sum of per-row losses over all rows.

Layer: kernel library (trnsim.kernels); written against the public NKI API only.
"""

from __future__ import annotations

import numpy as np

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

from . import _rowops as ro
from ._common import P_MAX, fail
from ._int64 import is_pair, low_word
from ._rows import Operand, Prefetch, RowSpace, col_operand, plan_rows, shaped_row_operand

DTYPES = ("bfloat16", "float16", "float32")
REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}  # ATen's at::Reduction enum
MAX_CHUNK_COLS = 8192  # classes per chunk when a row is longer than one SBUF tile holds
FP32_MIN = -3.4028234663852886e38  # on_false of a max-selection (nki-api.md §7.3 range_select)
F32 = nl.float32


# ---------------------------------------------------------------- argument handling
def as_rows(what: str, x):
    """x with the classes on dim 1: [N, C] and [N, C, *S] as they are, [C] as a [1, C] view."""
    if len(x.shape) >= 2:
        return x
    if len(x.shape) == 1:
        return x.ap([[0, 1], [x.strides[0], x.shape[0]]], offset=x.offset)
    fail(f"{what}: input must be [C], [N, C] or [N, C, *S], got shape {list(x.shape)}")
    return None


def target_pairs(what: str, target, row_shape: tuple[int, ...]) -> Operand:
    """The targets as a row operand of int64 pair words (kernels/_int64.py): an int32 view of
    shape S + (2,), S the row shape [N, *S] of the input (or a flat / keepdim form of it)."""
    if not is_pair(target):
        fail(
            f"{what}: target must be an int64 pair view (int32, shape S + (2,)), got "
            f"{target.dtype} {list(target.shape)}"
        )
    low = target.select(len(target.shape) - 1, 0)  # same offset; the pattern adds the words
    op = shaped_row_operand(low, row_shape, what, "target")
    return Operand(low, op.row_strides, None, tail=((1, 2),))


def loss_space(what: str, x, target, cols: dict, rows: dict, reduction: int) -> RowSpace:
    """Rows [N, *S] (the input without its class dim 1), the C classes as columns."""
    if reduction not in REDUCTIONS:
        fail(f"{what}: reduction={reduction!r} is not one of 0 (none), 1 (mean), 2 (sum)")
    x2 = as_rows(what, x)
    if x.dtype not in DTYPES:
        fail(f"{what}: input dtype {x.dtype} is not one of {', '.join(DTYPES)}")
    row_shape = (x2.shape[0], *x2.shape[2:])
    ops = {"x": col_operand(x2, 1), "t": target_pairs(what, target, row_shape)}
    for name, v in cols.items():
        if v is not None:
            if tuple(v.shape) != tuple(x.shape):
                fail(f"{what}: {name} has shape {list(v.shape)}, expected {list(x.shape)}")
            ops[name] = col_operand(as_rows(what, v), 1)
    for name, v in rows.items():
        if v is not None:
            ops[name] = shaped_row_operand(v, row_shape, what, name)
    return RowSpace(row_shape, x2.shape[1], ops)


def check_scalar(what: str, name: str, v) -> None:
    if v is not None and int(np.prod(v.shape)) != 1:
        fail(f"{what}: {name} must hold one value, got shape {list(v.shape)}")


def scalar_rows(v, m: int, g: int, name: str):
    """A one-element HBM tensor on every row of a tile: [m, G] fp32 (stride-0 DMA)."""
    t = ro.sbuf((m, g), F32, name)
    nisa.dma_copy(dst=t, src=v.ap([[0, m], [0, g]], offset=v.offset))
    return t


def class_iota(g: int, cols: int):
    """[128, G, cols] fp32 with value j at column j (the class index within a chunk)."""
    t = ro.sbuf((P_MAX, g, cols), F32, "class_iota")
    nisa.iota(dst=t, pattern=[[0, g], [1, cols]], offset=0, channel_multiplier=0)
    return t


class Targets:
    """The targets of a row tile as fp32 [m, G], whether each row counts (valid = target !=
    ignore_index), and per chunk the one-hot selection of the target class."""

    def __init__(self, space: RowSpace, tile, iota, ignore_index: int):
        m, g = tile.parts, tile.g
        words = space.fetch(tile, "t", nl.int32)  # [m, G, 2]: both words in one DMA
        self.t = ro.sbuf((m, g), F32, "target")
        nisa.tensor_copy(dst=self.t, src=low_word(words))  # int32 -> fp32, exact below 2^24
        self.valid = ro.sbuf((m, g), F32, "valid")
        nisa.tensor_scalar(
            dst=self.valid, data=self.t, op0=nl.not_equal, operand0=float(ignore_index)
        )
        self.iota, self.m, self.g = iota, m, g

    def _rel(self, c0: int):
        if not c0:
            return self.t
        rel = ro.sbuf((self.m, self.g), F32, "target_rel")
        nisa.tensor_scalar(dst=rel, data=self.t, op0=nl.subtract, operand0=float(c0))
        return rel

    def mask(self, c0: int, c1: int):
        """uint8 [m, G, c1-c0]: 1 at each row's target class within classes c0..c1."""
        mask = ro.sbuf((self.m, self.g, c1 - c0), nl.uint8, "target_mask")
        ro.apply_col(mask, self.iota[: self.m, : self.g, : c1 - c0], nl.equal, self._rel(c0))
        return mask

    def pick(self, dst, mask, data) -> None:
        """dst [m, G] = data at the target class where `mask` has it. With G = 1 a max over
        the row of where(mask, data, FP32_MIN) (chunks then combine by max); with G > 1 (one
        chunk) a sum of where(mask, data, 0). A select, not mask * data: -inf elsewhere in
        the row must not turn into nan."""
        sel = ro.sbuf(data.shape, F32, "selected")
        if self.g == 1:
            nisa.select_reduce(
                dst=sel,
                predicate=mask,
                on_true=data,
                on_false=FP32_MIN,
                reduce_res=dst,
                reduce_cmd=nisa.reduce_cmd.reset_reduce,
                reduce_op=nl.maximum,
            )
            return
        nisa.select_reduce(dst=sel, predicate=mask, on_true=data, on_false=0.0)
        ro.row_reduce(dst, sel, nl.add)

    def one_hot_scaled(self, dst, coef, c0: int, c1: int) -> None:
        """dst [m, G, c1-c0] = coef where the column is the target class, else 0."""
        ro.apply_col(
            dst,
            self.iota[: self.m, : self.g, : c1 - c0],
            nl.equal,
            self._rel(c0),
            nl.multiply,
            coef,
        )


class Total:
    """Sum over all rows of per-row (loss, weight) [m, 2, G]: fp32 partials per partition,
    summed across partitions at the end."""

    def __init__(self):
        self.acc = ro.sbuf((P_MAX, 2), F32, "loss_acc")
        nisa.memset(dst=self.acc, value=0.0)

    def add(self, lw) -> None:
        m = lw.shape[0]
        part = ro.sbuf((m, 2), F32, "loss_part")
        nisa.tensor_reduce(dst=part, op=nl.add, data=lw, axis=2)
        nisa.tensor_tensor(dst=self.acc[:m], data1=self.acc[:m], data2=part, op=nl.add)

    def store(self, out, total_weight, mean: bool) -> None:
        tot = ro.sbuf((1, 2), F32, "loss_total")
        ro.partition_sum(tot, self.acc)
        res = tot[:, 0:1]
        if mean:  # sum / total weight (0 / 0 is nan, as torch)
            res = ro.sbuf((1, 1), F32, "loss_mean")
            nisa.reciprocal(dst=res, data=tot[:, 1:2])
            nisa.tensor_tensor(dst=res, data1=res, data2=tot[:, 0:1], op=nl.multiply)
        for view, val in ((out, res), (total_weight, tot[:, 1:2])):
            if view is not None:
                nisa.dma_copy(dst=view.ap([[0, 1], [0, 1]], offset=view.offset), src=val)


def zero_scalar(view) -> None:
    if view is not None:
        z = ro.sbuf((1, 1), F32, "zero")
        nisa.memset(dst=z, value=0.0)
        nisa.dma_copy(dst=view.ap([[0, 1], [0, 1]], offset=view.offset), src=z)


def requests(tiles, passes: int, chunks) -> list:
    return [(t, p, c) for t in tiles for p in range(passes) for c in chunks]


# ---------------------------------------------------------------- kernel steps
def loss_plan(what, sp, x_dtype, vecs, extra_col_bytes: int):
    # per class column: the input, the target mask (uint8), a selection and the iota (fp32)
    col_bytes = x_dtype.itemsize + 9 + extra_col_bytes + vecs.col_bytes
    plan = plan_rows(sp, col_bytes, x_dtype.itemsize, what, vecs.fixed_bytes, MAX_CHUNK_COLS)
    return plan, class_iota(plan.g, plan.chunks[0][1])


def loader(sp, x_dtype, vecs, x_passes: tuple):
    """Prefetch loader of (tile, pass, chunk): the input chunk in passes `x_passes`, and the
    class-weight chunk when weights are not resident."""

    def load(r):
        t, p, (c0, c1) = r
        got = vecs.load(t.parts, c0, c1)
        if p in x_passes:
            got["x"] = sp.fetch(t, "x", x_dtype, c0, c1)
        return got

    return load


def grad_scale(sp, tile, tg, red: str, grad_out, total_weight):
    """The upstream gradient of each row [m, G]: grad_out per row (none), grad_out (sum) or
    grad_out / total_weight (mean), times valid (ignored rows get none)."""
    m, g = tile.parts, tile.g
    if red == "none":
        gs = sp.fetch(tile, "gout", F32)
    else:
        gs = scalar_rows(grad_out, m, g, "grad_out")
        if red == "mean":
            tw = scalar_rows(total_weight, m, g, "total_weight")
            nisa.reciprocal(dst=tw, data=tw)
            nisa.tensor_tensor(dst=gs, data1=gs, data2=tw, op=nl.multiply)
    nisa.tensor_tensor(dst=gs, data1=gs, data2=tg.valid, op=nl.multiply)
    return gs


def combine(parts, op):
    """[m, G] from per-chunk values [m, G, n_chunks]."""
    if parts.shape[2] == 1:
        return parts[:, :, 0]
    out = ro.sbuf(parts.shape[:2], F32, "combined")
    ro.row_reduce(out, parts, op)
    return out


def target_weights(pf: Prefetch, tg, plan, vecs, m, g, kept=None):
    """w[target] per row [m, G] from a pass over the class chunks (weights only)."""
    parts = ro.sbuf((m, g, len(plan.chunks)), F32, "target_weight")
    for c, (c0, c1) in enumerate(plan.chunks):
        ld = pf.next()
        if kept is not None:
            kept.append(ld)
        tg.pick(parts[:, :, c], tg.mask(c0, c1), vecs.view("weight", ld, m, g, c0, c1))
    return combine(parts, nl.maximum)


def store_totals(total, out, total_weight, red: str, n_dims: int) -> None:
    if red != "none":
        total.store(out, total_weight, red == "mean")
    elif n_dims == 1:  # torch: an unbatched input's total weight is computed even for none
        total.store(None, total_weight, False)
    else:
        zero_scalar(total_weight)


def check_reduced(what: str, red: str, grad_out, total_weight) -> None:
    if red != "none":
        check_scalar(what, "grad_out", grad_out)
    if red == "mean" and total_weight is None:
        fail(f"{what}: reduction=1 (mean) needs total_weight")
    check_scalar(what, "total_weight", total_weight)


# ---------------------------------------------------------------- reference helpers (numpy)
def class_rows(x) -> np.ndarray:
    """A float64 copy of an input [C], [N, C] or [N, C, *S] as rows [R, C] (classes last)."""
    x64 = np.asarray(x, np.float64)
    if x64.ndim == 1:
        return x64.reshape(1, -1)
    return np.moveaxis(x64, 1, -1).reshape(-1, x64.shape[1])


def from_class_rows(rows: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Rows [R, C] back to an input's shape [C], [N, C] or [N, C, *S]."""
    if len(shape) == 1:
        return rows.reshape(shape)
    moved = rows.reshape((shape[0], *shape[2:], shape[1]))
    return np.moveaxis(moved, -1, 1)


def row_shape_of(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The per-row output shape of an input shape ([N, *S]; (1,) for an unbatched [C])."""
    return (1,) if len(shape) == 1 else (shape[0], *shape[2:])
