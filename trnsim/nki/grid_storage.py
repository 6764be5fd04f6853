"""nl.empty_like and nl.alloc_stream_buffers (NKI 0.7+): new storage shaped like a view.

Allocation only: nothing here issues an instruction or reads a value. A grid's copy keeps its
concrete type, navigation shape, tile shape, block grouping and exact edge extents; cells a
strided selection skips are packed out. A stream pool (NkiStreamBuffers) holds `num_slots`
copies of one step of a view and hands out slot k % num_slots for logical step k.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from trnsim.errors import ConstraintError, KernelError
from trnsim.nki._isa_base import language_function
from trnsim.nki.grids import NkiGrid, NkiTileGrid, _alloc, _Sel
from trnsim.nki.registers import VirtualRegister
from trnsim.nki.tensor import NkiTensor, as_dtype
from trnsim.program import capture_location

# nki.isa.dma_transpose's permutations, by rank (the empty_like/alloc_stream_buffers docs)
TRANSPOSE_ORDERS = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}
P_MAX = 128  # at most this many destination partitions after transpose_axes (empty_like docs)


@dataclass(frozen=True)
class _Dim:
    """One source dim that a grid's selection keeps: packed extent, tile, block, consumed."""

    extent: int
    tile: int
    block: int | None
    consumed: bool


def _kept_dims(g: NkiGrid) -> list[_Dim]:
    """The dims of g's selection (an integer-indexed untiled slab drops its dim)."""
    untiled = len(g._tile) - g._ntiled
    out = []
    for d, s in enumerate(g._sel):
        if s.consumed and d < untiled:
            continue
        extent = sum(b - a for a, b in (g._cell_range(d, k) for k in g._selected(d)))
        block = None if g._block is None else g._block[d]
        out.append(_Dim(extent, g._tile[d], block, s.consumed))
    return out


def _order(axes: Any, rank: int, what: str) -> tuple[int, ...]:
    try:
        order = tuple(int(a) for a in axes)
    except (TypeError, ValueError) as e:
        raise ConstraintError(f"{what}: transpose_axes={axes!r} is not a tuple of ints") from e
    if TRANSPOSE_ORDERS.get(rank) != order:
        allowed = "; ".join(f"{o} for rank {r}" for r, o in TRANSPOSE_ORDERS.items())
        raise ConstraintError(
            f"{what}: transpose_axes={order} for {rank} (tiled) dims; nisa.dma_transpose "
            f"supports {allowed}"
        )
    return order


def _check_transpose_target(buffer: Any, partitions: int, what: str, axis_of: str) -> None:
    from trnsim.nki import language as nl

    if not nl.is_sbuf(buffer):
        raise ConstraintError(
            f"{what}: transpose_axes prepares an SBUF destination for nisa.dma_transpose; "
            f"buffer is {buffer!r}, use nl.sbuf"
        )
    if partitions > P_MAX:
        raise ConstraintError(
            f"{what}: transpose_axes makes the source's {axis_of} extent {partitions} the "
            f"destination partition extent; at most {P_MAX}"
        )


def _tensor_like(
    x: Any, dtype: Any, buffer: Any, name: str, transpose_axes: Any, address: Any, what: str
) -> NkiTensor:
    from trnsim.nki import language as nl

    shape = tuple(x.shape)
    if transpose_axes is not None:
        order = _order(transpose_axes, len(shape), what)
        shape = tuple(shape[a] for a in order)
        _check_transpose_target(buffer, shape[0], what, f"dim {order[0]}")
    return nl.ndarray(shape, dtype, buffer, name, address)


def _grid_like(
    g: NkiGrid, dtype: Any, buffer: Any, name: str, transpose_axes: Any, address: Any, what: str
) -> NkiGrid:
    dims = _kept_dims(g)
    if any(d.extent == 0 for d in dims):
        raise ConstraintError(f"{what}: the grid selection {g!r} selects no cells")
    lead = len(dims) - g._ntiled
    if transpose_axes is not None:
        order = _order(transpose_axes, g._ntiled, what)
        dims = dims[:lead] + [dims[lead + a] for a in order]
        first = dims[lead]  # one tile of it occupies min(extent, tile) partitions on chip
        _check_transpose_target(
            buffer, min(first.extent, first.tile), what, f"tiled dim {order[0]} (per tile)"
        )
    element_shape = tuple(d.extent for d in dims)
    src, _ = _alloc(tuple(d.tile for d in dims[lead:]), element_shape, buffer, dtype, address, name)
    block = None if isinstance(g, NkiTileGrid) else tuple(d.block for d in dims)
    out = type(g)(
        src, (0,) * len(dims), element_shape, tuple(d.tile for d in dims), g._ntiled, block
    )
    sel = tuple(
        _Sel(0, 1, 1, True) if d.consumed else s for d, s in zip(dims, out._sel, strict=True)
    )
    return out._with(sel=sel)


def like(
    x: Any,
    dtype: Any = None,
    buffer: Any = None,
    name: str = "",
    transpose_axes: Any = None,
    address: Any = None,
    what: str = "nl.empty_like",
) -> Any:
    """Uninitialised storage with x's geometry: a tensor of x's shape, or a grid like x."""
    if not isinstance(x, NkiGrid) and not all(hasattr(x, a) for a in ("shape", "dtype", "buffer")):
        raise ConstraintError(
            f"{what}: x must be an NkiTensor, NkiTileGrid or NkiBlockGrid, got {type(x).__name__}"
        )
    dtype = x.dtype if dtype is None else dtype
    buffer = x.buffer if buffer is None else buffer
    if isinstance(x, NkiGrid):
        return _grid_like(x, dtype, buffer, name, transpose_axes, address, what)
    return _tensor_like(x, dtype, buffer, name, transpose_axes, address, what)


# ---------------------------------------------------------------- stream buffers
def _step(view: Any, dim: int, k: int) -> Any:
    return view[(slice(None),) * dim + (k,)]


def _slot_stride_bytes(slot: Any, region_is_psum: bool, bank_bytes: int) -> int:
    """Bytes per partition one slot spans (whole PSUM banks: a PSUM tensor starts on one)."""
    t = slot if isinstance(slot, NkiTensor) else slot._src.t
    nbytes = int(np.prod(t.shape[1:], dtype=np.int64)) * t.dtype.itemsize
    return -(-nbytes // bank_bytes) * bank_bytes if region_is_psum else nbytes


class NkiStreamBuffers:
    """A pool of on-chip slots for the steps of a view: buffers[k] is slot k % num_slots.

    Made by nl.alloc_stream_buffers. Selecting a slot allocates nothing and issues nothing;
    the last step of a grid whose final cell is clamped gets a clamped view of its slot.
    """

    def __init__(self, view: Any, dim: int, slots: list[Any], step_dim: int | None) -> None:
        self._view = view
        self._dim = dim
        self._slots = tuple(slots)
        self._steps = view.shape[dim]
        self._step_dim = step_dim  # the slot dim the stream advances along (grids), else None
        self._full = self._extent(0) if step_dim is not None else 0

    @property
    def num_slots(self) -> int:
        return len(self._slots)

    def _extent(self, k: int) -> int:
        g = self._view
        d = [i for i, s in enumerate(g._sel) if not s.consumed][self._dim]
        a, b = g._cell_range(d, g._selected(d)[k])
        return b - a

    def __getitem__(self, k: Any) -> Any:
        try:
            return self._select(k)
        except KernelError as e:
            raise e.with_loc(capture_location()) from None

    def _select(self, k: Any) -> Any:
        allowed = (
            f"index with a nonnegative Python int below {self._steps} (view.shape[{self._dim}]),"
            f" e.g. `for k in range({self._steps})`, or a fixed index such as buffers[0]"
        )
        if isinstance(k, VirtualRegister):
            raise ConstraintError(
                f"NkiStreamBuffers: index {k!r} is a runtime value (a register, such as an "
                f"nl.fori_loop or device-loop index); slots are chosen at compile time: {allowed}"
            )
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
            raise ConstraintError(
                f"NkiStreamBuffers: index {k!r} ({type(k).__name__}) is not an int; {allowed}"
            )
        k = int(k)
        if k < 0:
            raise ConstraintError(
                f"NkiStreamBuffers: negative index {k} is not supported; {allowed}"
            )
        if k >= self._steps:
            raise ConstraintError(
                f"NkiStreamBuffers: index {k} is out of range for a stream of {self._steps} "
                f"steps; {allowed}"
            )
        slot = self._slots[k % self.num_slots]
        if self._step_dim is None:
            return slot
        n = self._extent(k)
        if n == self._full:
            return slot
        p = self._step_dim
        hi = (*slot._hi[:p], slot._lo[p] + n, *slot._hi[p + 1 :])
        return slot._with(hi=hi)  # zero-copy: the same storage, its edge clamped

    def __iter__(self) -> Any:
        raise ConstraintError(
            "NkiStreamBuffers: iterating over the pool is not supported; index it by "
            f"step: `for k in range({self._steps}): buffers[k]`",
            capture_location(),
        )

    def __len__(self) -> int:
        raise ConstraintError(
            f"NkiStreamBuffers: len() is not supported; the stream has view.shape[{self._dim}]"
            f" = {self._steps} steps and the pool {self.num_slots} slots (.num_slots)",
            capture_location(),
        )

    def __bool__(self) -> bool:
        return True  # (else Python would ask __len__)

    def __repr__(self) -> str:
        return (
            f"NkiStreamBuffers(num_slots={self.num_slots}, steps={self._steps}, "
            f"slot={self._slots[0]!r})"
        )


def _stream_dim_in_slot(view: NkiGrid, dim: int, transpose_axes: Any) -> int | None:
    """Where the streamed (consumed) dim lands in a slot's dims; None if the step drops it."""
    untiled = len(view._tile) - view._ntiled
    d = [i for i, s in enumerate(view._sel) if not s.consumed][dim]
    if d < untiled:
        return None  # an untiled slab: its dim is dropped, each step is whole
    kept = [i for i, s in enumerate(view._sel) if not (s.consumed and i < untiled)]
    p = kept.index(d)
    lead = len(kept) - view._ntiled
    if transpose_axes is not None and p >= lead:
        order = TRANSPOSE_ORDERS[view._ntiled]
        p = lead + order.index(p - lead)
    return p


@language_function
def alloc_stream_buffers(
    view: Any,
    *,
    buffer: Any,
    dim: Any,
    num_slots: Any = 2,
    dtype: Any = None,
    transpose_axes: Any = None,
    address: Any = None,
    name: str = "",
) -> NkiStreamBuffers:
    """num_slots on-chip copies of one step of `view` along coordinate `dim` of view.shape."""
    from trnsim.nki import language as nl
    from trnsim.nki.context import current

    what = "nl.alloc_stream_buffers"
    ctx = current(what)
    if not isinstance(view, (NkiTensor, NkiGrid)):
        raise ConstraintError(
            f"{what}: view must be an NkiTensor, NkiTileGrid or NkiBlockGrid, got "
            f"{type(view).__name__}"
        )
    if not nl.is_on_chip(buffer):
        raise ConstraintError(
            f"{what}: buffer={buffer!r}; stream slots live on chip: use nl.sbuf or nl.psum"
        )
    rank = len(view.shape)
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or not 0 <= dim < rank:
        raise ConstraintError(
            f"{what}: dim={dim!r} must be a Python int in range({rank}), a coordinate of "
            f"view.shape {tuple(view.shape)}"
        )
    if (
        isinstance(num_slots, bool)
        or not isinstance(num_slots, (int, np.integer))
        or (num_slots < 1)
    ):
        raise ConstraintError(f"{what}: num_slots={num_slots!r} must be a positive int")
    dim, num_slots = int(dim), int(num_slots)
    dtype = as_dtype(view.dtype if dtype is None else dtype)
    step = _step(view, dim, 0)
    slots = [
        like(step, dtype, buffer, _slot_name(name, 0, num_slots), transpose_axes, address, what)
    ]
    stride = 0
    if address is not None and num_slots > 1:
        bank = ctx.chip.tile_size.get("psum_bank_fmax_bytes", 2048)
        stride = _slot_stride_bytes(slots[0], nl.is_psum(buffer), bank)
    for i in range(1, num_slots):
        addr = None if address is None else (address[0], address[1] + i * stride)
        slots.append(
            like(step, dtype, buffer, _slot_name(name, i, num_slots), transpose_axes, addr, what)
        )
    step_dim = _stream_dim_in_slot(view, dim, transpose_axes) if isinstance(view, NkiGrid) else None
    return NkiStreamBuffers(view, dim, slots, step_dim)


def _slot_name(name: str, i: int, n: int) -> str:
    return f"{name}_{i}" if name and n > 1 else name
