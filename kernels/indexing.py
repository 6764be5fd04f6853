"""Indexing device kernels: index_select, advanced indexing (index, index_put), index_add,
embedding_backward, gather and scatter, with float64/numpy references.

Layer: kernel library (trnsim.kernels); written against the public NKI API only. The row
kernels share `_index_rows.IndexedRows` (indirect DMA: rows on partitions, one DMA per 128
rows); gather and scatter (one index per element) are in `_gather` and `_scatter`.

Index tensors are int32, or int64 as int32 pair views (docs/device-kernels.md) named in the
kernel's `int64=` keyword (the data tensors too when they are int64: their words move
together). An index outside its axis raises OutOfBoundsError naming the op, the value and the
axis size: the indirect DMAs check each index against its axis (oob_mode=error).
"""

from __future__ import annotations

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

from . import _rowops as ro
from ._args import Tensor, axis
from ._boxes import Group, hbm
from ._common import fail
from ._gather import gather, gather_ref
from ._index_rows import IndexedRows, index_tensor
from ._rows import Prefetch, RowSpace, col_operand, plan_rows
from ._scatter import scatter, scatter_ref, scatter_value

COUNT_CHUNK = 4096  # indices compared per instruction when counting token frequencies
ZERO_BYTES = 32768  # bytes per partition of the zero tile that clears grad_weight

__all__ = [
    "embedding_backward",
    "gather",
    "gather_ref",
    "index",
    "index_add",
    "index_put",
    "index_select",
    "scatter",
    "scatter_ref",
    "scatter_value",
]


def _one_index(what: str, index, int64) -> Tensor:
    t = index_tensor(what, "index", index, int64)
    if len(t.shape) != 1:
        fail(f"{what}: index has shape {list(t.shape)}; it must be 1-d (a 0-d index as [1])")
    return t


def _index_list(what: str, indices, rank: int, int64) -> list[Tensor | None]:
    names = tuple(int64)
    out = []
    for k, v in enumerate(indices):
        if v is None:
            out.append(None)
            continue
        name = f"indices[{k}]"
        flag = (name,) if "indices" in names or f"indices.{k}" in names else ()
        out.append(index_tensor(what, name, v, flag))
    if len(out) > rank:
        fail(f"{what}: {len(out)} indices for a {rank}-d tensor")
    return out


def index_select(out, x, index, *, dim: int, int64=()) -> None:
    """out = x.index_select(dim, index): out[..., i, ...] = x[..., index[i], ...].

    Dimensions:
        x: any shape and strides; index: [n]; out: x's shape with `dim` of size n.

    Args:
        out, x: same dtype (any, int64 pairs included).
        index: int32 or int64 (pair view named in int64=); negative indices are an error.
        dim: the indexed axis (negative allowed).

    Notes:
        Rows on partitions, 128 per tile: the index words load into SBUF and one HBM->HBM
        DMA per tile gathers the rows through a vector_select of axis `dim`.
    """
    what = "index_select"
    xt, ot = Tensor(what, "x", x, int64), Tensor(what, "out", out, int64)
    d = axis(what, "dim", dim, len(xt.shape))
    it = _one_index(what, index, int64)
    IndexedRows(what, xt, [None] * d + [it], ot, wrap=False).gather()


def index(out, x, indices, *, int64=()) -> None:
    """out = x[indices[0], indices[1], ...] (advanced indexing with integer index tensors;
    None entries leave their axis whole; missing trailing entries too).

    Dimensions:
        indices: tensors of one shape B (broadcast by the caller, stride 0 allowed); out:
        B in place of the indexed axes when they are adjacent, else B first, then x's other
        axes (torch's layout).

    Args:
        out, x: same dtype. indices: int32 or int64 (named "indices" in int64=, or
        "indices.k" for entry k). Negative indices wrap once, as in torch.
    """
    what = "index"
    xt, ot = Tensor(what, "x", x, int64), Tensor(what, "out", out, int64)
    IndexedRows(what, xt, _index_list(what, indices, len(xt.shape), int64), ot, wrap=True).gather()


def index_put(out, indices, values, *, accumulate: bool = False, int64=()) -> None:
    """out[indices] = values (out[indices] += values with accumulate): torch's index_put_ on
    `out`, which holds self's values already.

    Dimensions:
        values: the shape out[indices] has (broadcast by the caller, stride 0 allowed).

    Notes:
        Without accumulate, duplicate indices keep one of their rows (the last here, torch
        leaves it undefined). With accumulate, the DMA engines add in fp32 and round to
        out's dtype after each row (integers exact below 2^24); int64 out is not supported.
    """
    what = "index_put"
    ot, vt = Tensor(what, "out", out, int64), Tensor(what, "values", values, int64)
    rows = IndexedRows(what, ot, _index_list(what, indices, len(ot.shape), int64), vt, wrap=True)
    if not accumulate:
        rows.put()
        return
    if ot.pair:
        fail(
            f"{what}: accumulate=True into an int64 tensor; the DMA accumulates in fp32 "
            "(int32 and float outputs only)"
        )
    rows.accumulate()


def index_add(out, index, src, *, dim: int, alpha: float = 1, int64=()) -> None:
    """out.index_add_(dim, index, src, alpha=alpha): out[..., index[i], ...] += alpha *
    src[..., i, ...], duplicates accumulating (the backward of index_select / embedding).

    Args:
        out: self's values, updated in place (float or int32; int64 is not supported).
        index: [n] int32/int64. src: out's shape with `dim` of size n. dim: negative allowed.

    Notes:
        src rows load into SBUF (fp32, scaled by alpha) and one DMA read-modify-write per
        tile of 128 rows adds them (fp32 in the DMA engines, unique_indices=False).
    """
    what = "index_add"
    ot, st = Tensor(what, "out", out, int64), Tensor(what, "src", src, int64)
    if ot.pair:
        fail(f"{what}: int64 out; the DMA accumulates in fp32 (int32 and float outputs only)")
    d = axis(what, "dim", dim, len(ot.shape))
    it = _one_index(what, index, int64)
    IndexedRows(what, ot, [None] * d + [it], st, wrap=False).accumulate(alpha)


def embedding_backward(
    grad_weight,
    grad_out,
    indices,
    *,
    padding_idx: int = -1,
    scale_grad_by_freq: bool = False,
    int64=(),
) -> None:
    """grad_weight = the dense gradient of embedding(indices, weight): zeros, then
    grad_weight[indices[b]] += grad_out[b] for every b (duplicates accumulate), each row
    scaled by 1 / count(indices[b]) with scale_grad_by_freq; row padding_idx stays zero.

    Dimensions:
        grad_weight: [V, D]; indices: any shape B; grad_out: B + [D].

    Notes:
        The zeros are one DMA per block of rows from a zero SBUF tile; the rows accumulate
        through DMA read-modify-writes (fp32). Token counts compare each tile's 128 indices
        with all indices (VectorE, fp32: indices below 2^24).
    """
    what = "embedding_backward"
    gw, go = (
        Tensor(what, "grad_weight", grad_weight, int64),
        Tensor(what, "grad_out", grad_out, int64),
    )
    if len(gw.shape) != 2 or not gw.is_float:
        fail(
            f"{what}: grad_weight must be a 2-d float tensor [V, D], got {list(gw.shape)} "
            f"{gw.dtype}"
        )
    it = index_tensor(what, "indices", indices, int64)
    _zero_rows(gw.view)
    rows = IndexedRows(what, gw, [it], go, wrap=False)
    rows.accumulate(_inverse_counts(it) if scale_grad_by_freq else None)
    v = gw.shape[0]
    if padding_idx != -1:  # aten's convention: -1 = no padding row
        if not 0 <= padding_idx < v:
            fail(f"{what}: padding_idx={padding_idx} is outside [0, {v}) (or -1 for none)")
        _zero_rows(gw.view[padding_idx : padding_idx + 1, :])


def _zero_rows(view) -> None:
    """view [R, D] = 0: one DMA per block of G*128 rows (up to ZERO_BYTES per partition) from
    one zero SBUF tile."""
    space = RowSpace((view.shape[0],), view.shape[1], {"w": col_operand(view, 1)})
    plan = plan_rows(space, 4, view.dtype.itemsize, "embedding_backward")
    g = plan.g
    if len(plan.chunks) == 1:
        row_bytes = view.shape[1] * view.dtype.itemsize
        g = max(1, min(ZERO_BYTES // row_bytes, -(-space.n_rows // 128)))
    zero = None
    for tile in space.tiles(g):
        for c0, c1 in plan.chunks:
            if zero is None or zero.shape[0] < tile.parts or zero.shape[-1] < c1 - c0:
                zero = ro.sbuf((128, tile.g, c1 - c0), view.dtype, "zeros")
                nisa.memset(dst=zero, value=0.0)
            space.store(tile, "w", zero[: tile.parts, : tile.g, : c1 - c0], c0, c1)


def _inverse_counts(it: Tensor):
    """A function of a row tile: 1 / (number of indices equal to each of its indices)."""
    boxes = Group.of([it.view], list(range(len(it.shape)))).boxes(COUNT_CHUNK)

    def load_all(box, parts):  # a chunk of all indices on every partition (stride-0 read)
        t = ro.sbuf((parts, box.size), nl.float32, "all_indices")
        nisa.dma_copy(
            dst=t,
            src=it.view.ap([[0, parts], *box.pattern(0)], offset=it.view.offset + box.offsets[0]),
        )
        return t

    def scale(tile):
        mine = ro.sbuf((tile.parts, 1), nl.float32, "my_index")
        for blk in tile.blocks:
            nisa.dma_copy(
                dst=mine[blk.p0 : blk.p0 + blk.parts],
                src=hbm(it.view, blk.patterns["i0"], blk.offsets["i0"]),
            )
        count = ro.sbuf((tile.parts, 1), nl.float32, "count")
        part = ro.sbuf((tile.parts, 1), nl.float32, "count_part")
        fetch = Prefetch(boxes, lambda box: load_all(box, tile.parts))
        for k in range(len(boxes)):
            eq = fetch.next()
            nisa.tensor_scalar(dst=eq, data=eq, op0=nl.equal, operand0=mine)
            nisa.tensor_reduce(dst=count if k == 0 else part, op=nl.add, data=eq, axis=1)
            if k:
                nisa.tensor_tensor(dst=count, data1=count, data2=part, op=nl.add)
        nisa.reciprocal(dst=count, data=count)
        return count

    return scale
