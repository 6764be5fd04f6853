"""Tiling of elementwise device kernels over HBM views of any shape, strides and broadcasting.

Layer: kernel library (trnsim.kernels); NKI API only (HBM access patterns, DMA, SBUF tiles).

A pointwise-style kernel writes one output of shape S from operands that are broadcastable to S
(numpy rules; stride-0 dims allowed). `plan` turns the operands into a list of `Tile`s: boxes of
the index space of S, each `parts` (<= 128) rows on the partitions by `free` (at most three
dims, at most `max_free` elements) per partition, with, for every operand, the DMA access
pattern of its elements in that box. A kernel body then sees matching SBUF tiles of one shape
for all its operands, whatever their layouts.

How the boxes are chosen:

1. Every operand is broadcast to S (missing or size-1 dims get stride 0); dims of size 1 go.
2. Adjacent dims merge wherever *every* operand allows it (stride[i] == stride[i+1] * n[i+1]):
   same-layout contiguous operands become one dim, a row-broadcast bias keeps two.
3. A few candidate layouts are scored by an estimated time (TILE_COST per tile plus the
   elements streamed per partition), then partitions used, then a unit-stride innermost free
   dim (long DMA runs). Each dim may be the partition dim (chunks of 128, ragged last chunk) or
   be split into [p, C] rows (p = a divisor of the dim in [64, 128], so nothing is left over,
   else 128 with a remainder of < 128 rows tiled on its own). Free dims are taken from the
   innermost outwards while they fit `max_free`; the first one that does not fit is chunked
   (balanced chunks); dims left over are looped. So a contiguous tensor of N elements becomes
   [p, N / p] (p | N, 64 <= p <= 128) or [128, N // 128] plus a [N % 128, 1] remainder, in
   free chunks of <= max_free; small odd sizes one [1, N] tile (4x4 -> one [16, 1] tile,
   N = 1009 -> one [1, 1009]); an [M, N] + [N] bias add [128, N] row blocks (the bias loaded
   once); a transposed operand [128, ...] blocks with element-strided DMAs on its side.

`prefetched` loads the input tiles of tile i+1 before yielding tile i (so the DMA queue does not
wait for tile i's compute), keeps a stride-0 free dim compact in SBUF (loaded once per row,
broadcast to the compute engines by a stride-0 SBUF view), and reuses a load whose access
pattern repeats from one tile to the next (a bias vector is read once, not once per row block).

Usage (kernels/pointwise.py, fill.py and optim.py are examples):

    ops = [T.operand(out, out.shape, "out"), T.operand(x, out.shape, "x")]
    tiles = T.plan(out.shape, ops, T.free_budget(bytes_per_element))
    for tile, (xt,) in T.prefetched(tiles, ops, [T.Load(1)]):
        res = nl.ndarray(tile.shape, dtype=out.dtype, buffer=nl.sbuf)
        ...  # compute res from xt (both of shape tile.shape = (parts, *free))
        T.store(tile, ops[0], 0, res)

Operands can also be *virtual index operands* (`index_operand`): no tensor, only strides over
S; their per-tile access gives the affine pattern of a logical index (iota's offset,
channel_multiplier and pattern), e.g. for arange or a triangle mask. An int64 *pair view*
(device-kernels.md: shape S + (2,), the words of each element adjacent) is a `pair_operand`:
planned over S, its tiles carry a trailing pair of words ([..., 2] in SBUF and in the DMA).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

from ._common import fail
from ._tile_plan import (  # noqa: F401  (re-exported: the tiling API is this module)
    MAX_FREE,
    P_MAX,
    TILE_COST,
    Access,
    Operand,
    Tile,
    plan,
)

DOUBLE_BUFFER = 2  # tiles in flight per operand (tile i computed while tile i+1 loads)


# ---------------------------------------------------------------- operands


def broadcast_strides(
    shape: Sequence[int], t_shape: Sequence[int], t_strides: Sequence[int], what: str
) -> tuple[int, ...]:
    """Strides of a (t_shape, t_strides) view broadcast to `shape` (numpy rules), 0 where
    broadcast; fail() if the shapes are not broadcastable."""
    shape, t_shape = tuple(shape), tuple(t_shape)
    if len(t_shape) > len(shape):
        fail(f"{what}: shape {list(t_shape)} has more dims than the output {list(shape)}")
    pad = len(shape) - len(t_shape)
    out = [0] * pad
    for n, tn, ts in zip(shape[pad:], t_shape, t_strides, strict=True):
        if tn == n:
            out.append(int(ts) if n > 1 else 0)
        elif tn == 1:
            out.append(0)
        else:
            fail(
                f"{what}: shape {list(t_shape)} does not broadcast to the output shape "
                f"{list(shape)} (numpy rules: each dim equal or 1)"
            )
    return tuple(out)


def operand(t: Any, shape: Sequence[int], what: str) -> Operand:
    """An HBM tensor read (or written) over `shape`, broadcast numpy-style."""
    return Operand(t, broadcast_strides(shape, t.shape, t.strides, what), int(t.offset))


def pair_operand(t: Any, shape: Sequence[int], what: str) -> Operand:
    """An int64 pair view (shape S' + (2,), last stride 1, S' broadcastable to `shape`)."""
    if len(t.shape) < 2 or t.shape[-1] != 2 or t.strides[-1] != 1:
        fail(
            f"{what}: an int64 operand is an int32 pair view of shape S + (2,) with last "
            f"stride 1 (device-kernels.md), got shape {list(t.shape)}, strides "
            f"{list(t.strides)}"
        )
    return Operand(
        t, broadcast_strides(shape, t.shape[:-1], t.strides[:-1], what), int(t.offset), pair=True
    )


def index_operand(strides: Sequence[int], offset: int = 0) -> Operand:
    """A virtual operand: the affine index offset + sum(i_d * strides[d]) over the shape."""
    return Operand(None, tuple(int(s) for s in strides), int(offset))


def row_major(shape: Sequence[int]) -> tuple[int, ...]:
    """Contiguous (row-major) element strides of `shape`."""
    out, acc = [], 1
    for n in reversed(tuple(shape)):
        out.append(acc)
        acc *= int(n)
    return tuple(reversed(out))


def free_budget(bytes_per_elem: float, share: float = 0.75) -> int:
    """max_free for a kernel whose tiles need `bytes_per_elem` bytes of SBUF per element (all
    its input, output and scratch tiles together), double-buffered in `share` of the SBUF."""
    budget = nl.tile_size.total_available_sbuf_size * share / DOUBLE_BUFFER
    return max(1, min(MAX_FREE, int(budget // max(bytes_per_elem, 1))))


# ---------------------------------------------------------------- loads


@dataclass(frozen=True)
class Load:
    """An operand to load into SBUF for each tile; `dtype` (None: the tensor's) different from
    the tensor's makes the DMA cast (through fp32, nki-api.md §5A.2)."""

    index: int
    dtype: Any = None


def load(tile: Tile, op: Operand, i: int, dtype: Any = None, name: str = "in") -> Any:
    """Operand i of `tile` in SBUF, shaped tile.shape (+ (2,) for a pair operand).

    A free dim the operand does not vary along (step 0) is loaded once (size 1 in SBUF) and
    broadcast to the engines by a stride-0 view; a partition-broadcast (step 0) is done by the
    DMA."""
    acc = tile.access[i]
    compact = tuple(n if s else 1 for n, s in zip(tile.free, acc.fsteps, strict=True))
    pair = (2,) if op.pair else ()
    t = nl.ndarray(
        (tile.parts, *compact, *pair), dtype=dtype or op.tensor.dtype, buffer=nl.sbuf, name=name
    )
    pat = [[acc.pstep, tile.parts]]
    pat += [[s, n] for n, s in zip(tile.free, acc.fsteps, strict=True) if s]
    if op.pair:
        pat.append([1, 2])
    nisa.dma_copy(dst=t, src=op.tensor.ap(pat, offset=acc.offset))
    for d, (n, c) in enumerate(zip(tile.free, compact, strict=True)):
        if c != n:
            t = t.broadcast(d + 1, n)
    return t


def _reuse_key(tile: Tile, i: int) -> tuple:
    a = tile.access[i]
    return (a.offset, a.pstep, a.fsteps, tile.free)


@dataclass(frozen=True)
class Work:
    """One tile of one plan and what to load for it (`tag` is the caller's, passed back)."""

    tag: Any
    tile: Tile
    operands: Sequence[Operand]
    loads: Sequence[Load]


def prefetched_work(work: Sequence[Work], name: str = "in") -> Iterator[tuple[Work, list[Any]]]:
    """Yield (work item, [SBUF tile per load]) for every item, the loads of item i+1 issued
    before item i is yielded (items may come from several plans: a multi-tensor launch).

    A load whose access pattern is the same as in the previous item of the same operand list
    is not repeated: its SBUF tile is reused (sliced to fewer partitions if needed)."""
    last: dict[tuple[int, int], tuple[tuple, int, Any]] = {}

    def fetch(w: Work) -> list[Any]:
        out = []
        for ld in w.loads:
            key, slot = _reuse_key(w.tile, ld.index), (id(w.operands), ld.index)
            hit = last.get(slot)
            if hit is not None and hit[0] == key and hit[1] >= w.tile.parts:
                t = hit[2]
                out.append(t if hit[1] == w.tile.parts else t[: w.tile.parts])
                continue
            t = load(w.tile, w.operands[ld.index], ld.index, ld.dtype, name)
            last[slot] = (key, w.tile.parts, t)
            out.append(t)
        return out

    if not work:
        return
    nxt = fetch(work[0])
    for k, w in enumerate(work):
        cur = nxt
        if k + 1 < len(work):
            nxt = fetch(work[k + 1])
        yield w, cur


def prefetched(
    tiles: Sequence[Tile], operands: Sequence[Operand], loads: Sequence[Load], name: str = "in"
) -> Iterator[tuple[Tile, list[Any]]]:
    """Yield (tile, [SBUF tile per load]) for every tile of one plan, as prefetched_work."""
    for w, loaded in prefetched_work([Work(None, t, operands, loads) for t in tiles], name):
        yield w.tile, loaded


def store(tile: Tile, op: Operand, i: int, src: Any) -> None:
    """Write the SBUF tile `src` (shaped tile.shape, + (2,) for a pair) to operand i."""
    nisa.dma_copy(dst=tile.hbm(op, i), src=src)
