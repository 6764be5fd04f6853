"""Buffers and strided Views onto the simulated memories (allocation: trnsim.allocation).

Knows dtypes and errors; knows nothing about instructions, engines or time.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from trnsim import dtypes as dt
from trnsim import wide_fp
from trnsim.errors import AllocationError, LivenessMiss, OutOfBoundsError
from trnsim.layout import Layout, interned, row_major  # noqa: F401 (memory's window type)
from trnsim.program import Region, SourceLocation

if TYPE_CHECKING:
    from trnsim.allocation import HBM, OnChipMemory, TileRecord
    from trnsim.hostmem import PendingPoison

INT_POISON = 4  # AWS's simulator fills fresh integer tensors with 4 (nki-api.md §2.2)

ON_CHIP = ("sbuf", "psum")


def poison_value(dtype: dt.DType) -> float | int:
    """Sentinel for never-written memory: NaN for floats, 4 for integers (as AWS's simulator)."""
    return float("nan") if dtype.kind == "float" else INT_POISON


class TensorLabel(str):
    """A rendered tensor reference for messages ("tensor 'x'" or a description)."""


def tensor_label(name: str) -> str:
    """How a message names a tensor given its name or its Buffer.label: "tensor 'x'"."""
    return str(name) if isinstance(name, TensorLabel) else f"tensor '{name}'"


class Buffer:
    """One allocation: a block of HBM, or a partitions x bytes rectangle of SBUF/PSUM."""

    _handle: int | None = None  # (a class default: __del__ may run on a half-made buffer)
    # Called as write_guard(buffer) before an instruction writes it: why the write is refused
    # ("" to allow it). Host arguments whose host array cannot take the values back
    # (trnsim.nki.host_io) have one; checked only on a Device marked guarded.
    write_guard: Callable[[Buffer], str] | None = None
    # The poison fill of a fresh HBM block not yet written out (hostmem.PendingPoison):
    # strided_array writes it for each chunk an access first reaches.
    poison: PendingPoison | None = None
    # The ticket of this on-chip tile's poison fill while it is deferred (hostmem.PendingFills
    # of its memory); 0: none.
    fresh: int = 0
    # NKI_PRECISE_FP=0: the fp32 values written through low-precision float views, per dtype
    # name (trnsim.wide_fp); None: none kept.
    wide: dict[str, np.ndarray] | None = None
    # trnsim.nki.liveness: the tile's key across runs of a launch, its birth (program length
    # at its allocation), and whether trnsim freed it after its last use so far.
    live_key: tuple | None = None
    born: int = 0
    liveness_freed: bool = False
    # HBM: the index of the last instruction of a Beta-1 launch that wrote it (-1: none), so
    # a block copied from it knows whether its source still holds the copied bytes (the
    # refetch rule, trnsim/compat/neuronxcc/nki/_refetch.py).
    last_write: int = -1
    # The launch's record of this on-chip allocation (allocation.TileRecord; None: not
    # recorded), told when the buffer is released.
    record: TileRecord | None = None

    def __init__(self, memory: HBM | OnChipMemory, space: str, core: int | None,
                 partition_start: int, partitions: int, byte_start: int, nbytes: int,
                 kind: str, name: str = "", handle: int | None = None, *,
                 loc: SourceLocation | None = None, shape: tuple[int, ...] | None = None,
                 dtype: dt.DType | None = None):
        self.memory = memory
        self.space = space  # hbm | sbuf | psum
        self.on_chip = space in ON_CHIP  # read for every operand of every instruction
        self.kind = kind  # shared_hbm | private_hbm | hbm | sbuf | psum
        self.core = core
        self.partition_start = partition_start
        self.partitions = partitions
        self.byte_start = byte_start
        self.nbytes = nbytes  # per partition on chip; total in HBM
        # Where it sits, as a key for what a Layout caches per buffer (region_of).
        self.place = (space, core, partition_start, byte_start, nbytes)
        self.name = name
        # Where and as what it was allocated: how messages describe an unnamed tensor.
        self.loc = loc
        self.shape = shape
        self.dtype = dtype
        self.reclaimed = ""  # why its space was handed to another tile (then unusable)
        self._handle = handle  # the allocation this buffer owns until released

    @property
    def label(self) -> TensorLabel:
        """The tensor as messages name it: "tensor 'x'", or for an unnamed one
        "sbuf tensor [128, 64] float32 allocated at kernel.py:12"."""
        if self.name:
            return TensorLabel(f"tensor '{self.name}'")
        text = f"{self.space} tensor"
        if self.shape is not None:
            text += f" {list(self.shape)}"
        if self.dtype is not None:
            text += f" {self.dtype.name}"
        if self.loc is not None:
            text += f" allocated at {self.loc.short()}"
        return TensorLabel(text)

    def release(self) -> None:
        """Give the space back to the allocator (once; also when the buffer is dropped)."""
        handle, self._handle = self._handle, None
        if handle is not None:
            self.memory.allocator.free(handle)
            if self.record is not None:
                self.record.released()

    def __del__(self) -> None:  # cheaper to set up than weakref.finalize, once per tile
        # Not at interpreter exit: numpy may be torn down already (its C API capsule then
        # raises from the allocator's bookkeeping), and the process's memory goes anyway.
        if not sys.is_finalizing():
            self.release()

    def elems_per_partition(self, dtype: dt.DType) -> int:
        """F: elements per partition (on chip) or in total (HBM) in units of dtype."""
        return self.nbytes // dtype.itemsize

    def raw(self) -> np.ndarray:
        """The bytes of this buffer: (partitions, nbytes) on chip, (nbytes,) in HBM."""
        if self.on_chip:
            p0, b0 = self.partition_start, self.byte_start
            fills = getattr(self.memory, "fills", None)
            if fills is not None and fills.fills:
                fills.flush()
            return self.memory.data[p0:p0 + self.partitions, b0:b0 + self.nbytes]
        self.materialize()
        return self.memory.data[self.byte_start:self.byte_start + self.nbytes]

    def materialize(self) -> None:
        """Write out the pending poison of an HBM buffer (before its bytes are reached other
        than through a View, e.g. by a zero-copy alias of HBM.base_address)."""
        if self.poison is not None:
            self.poison.touch_all()
            self.poison = None


def check_bounds(buf: Buffer, lay: Layout, what: str = "view") -> None:
    """Raise OutOfBoundsError if the layout leaves its buffer (or a partition, on chip), and
    AllocationError if the buffer's space was reclaimed (trnsim.nki.tile_reuse)."""
    if buf.reclaimed:
        if buf.liveness_freed:  # its last use was not its last: the launch runs again
            raise LivenessMiss(f"{what}: {buf.label} was used after trnsim freed it",
                               buf.live_key)
        raise AllocationError(f"{what}: {buf.label} can no longer be used: {buf.reclaimed}; "
                              "keeping it alive needs more memory than there is")
    # A view is checked when it is made and again by each instruction using it: remember the
    # buffer geometry the layout passed with (all the test below reads of the buffer).
    fits = (buf.on_chip, buf.partitions, buf.nbytes)
    if lay.__dict__.get("_fits") == fits:
        return
    _check_extent(buf, lay, what)
    lay.__dict__["_fits"] = fits


def _check_extent(buf: Buffer, lay: Layout, what: str) -> None:
    if lay.size == 0:
        return
    if not buf.on_chip:
        lo, hi = lay._span
        total = buf.nbytes // lay.dtype.itemsize
        if lo < 0 or hi >= total:
            raise OutOfBoundsError(
                f"{what}: elements [{lo}, {hi}] of {_space_label(buf)} are outside "
                f"[0, {total - 1}] ({total} elements of {lay.dtype})"
            )
        return
    f = buf.nbytes // lay.dtype.itemsize
    p_lo, p_hi, f_lo, f_hi = onchip_span(lay, f)
    if p_lo < 0 or p_hi >= buf.partitions or f_lo < 0 or f_hi >= f:
        raise OutOfBoundsError(
            f"{what}: {_space_label(buf)} has {buf.partitions} partitions x {f} "
            f"{lay.dtype} elements; the access reaches partitions [{p_lo}, {p_hi}] and "
            f"elements [{f_lo}, {f_hi}]"
        )


def _space_label(buf: Buffer) -> str:
    return f"{buf.space} tensor '{buf.name}'" if buf.name else str(buf.label)


def onchip_span(lay: Layout, f: int) -> tuple[int, int, int, int]:
    """(first, last partition, first, last free element) of an on-chip layout."""
    got = lay.__dict__.get("_onchip_span")  # Layout.cached, inlined: every operand needs it
    if got is not None and got[0] == f:
        return got[1]
    span = _onchip_span(lay, f)
    lay.__dict__["_onchip_span"] = (f, span)
    return span


def _onchip_span(lay: Layout, f: int) -> tuple[int, int, int, int]:
    p_off, f_off = divmod(lay.offset, f) if f else (0, lay.offset)
    p_lo = p_hi = p_off
    f_lo = f_hi = f_off
    for n, s in zip(lay.shape, lay.strides, strict=True):
        ps, fs = _split_stride(s, f)
        ext_p, ext_f = (n - 1) * ps, (n - 1) * fs
        p_lo, p_hi = p_lo + min(0, ext_p), p_hi + max(0, ext_p)
        f_lo, f_hi = f_lo + min(0, ext_f), f_hi + max(0, ext_f)
    return p_lo, p_hi, f_lo, f_hi


def _split_stride(s: int, f: int) -> tuple[int, int]:
    """An element stride as (partition step, free step): multiples of F step partitions."""
    if f and s != 0 and s % f == 0:
        return s // f, 0
    return 0, s


def strided_array(buf: Buffer, lay: Layout) -> np.ndarray:
    """A numpy view (no copy) of the layout's elements, in the dtype's storage type."""
    isz = lay.dtype.itemsize
    if lay.size == 0:
        return np.empty(lay.shape, dtype=lay.dtype.storage)
    data = buf.memory.data  # C-contiguous: (partitions, bytes) on chip, (bytes,) in HBM
    if buf.on_chip:
        fills = getattr(buf.memory, "fills", None)
        if fills is not None and fills.fills:  # deferred poison fills the access reaches first
            r = region_of(buf, lay)
            fills.flush_box(r.partition_start, r.partition_start + r.partitions, r.byte_start,
                            r.byte_end)
        f = buf.nbytes // isz
        row_bytes = data.strides[0]
        p_off, f_off = divmod(lay.offset, f)
        start = (buf.partition_start + p_off) * row_bytes + buf.byte_start + f_off * isz
        byte_strides = []
        for s in lay.strides:
            ps, fs = _split_stride(s, f)
            byte_strides.append(ps * row_bytes + fs * isz)
    else:
        start = buf.byte_start + lay.offset * isz
        byte_strides = [s * isz for s in lay.strides]
        poison = buf.poison
        if poison is not None:  # the fresh HBM chunks this access reaches hold poison first
            lo, hi = lay._span
            if poison.touch(buf.byte_start + lo * isz, buf.byte_start + (hi + 1) * isz):
                buf.poison = None
    # Stride the raw bits, then view: numpy cannot parse ml_dtypes' float8_e5m2 typestr
    # ('<f1'). np.ndarray over the memory's buffer is as_strided without its Python overhead,
    # and unlike as_strided it refuses an extent outside the memory.
    raw = np.dtype(f"u{isz}") if isz in (1, 2, 4, 8) else np.dtype(f"V{isz}")
    bits = np.ndarray(lay.shape, raw, buffer=data, offset=start, strides=tuple(byte_strides))
    return bits.view(lay.dtype.storage)


def region_of(buf: Buffer, lay: Layout) -> Region:
    """The bounding box of bytes a layout touches (the timing model's dependency unit)."""
    regions = lay.__dict__.get("_regions")  # per buffer placement: tile slots recur
    if regions is None:
        regions = lay.__dict__["_regions"] = {}
    region = regions.get(buf.place)
    if region is None:
        if len(regions) >= _PER_LAYOUT:
            regions.clear()
        region = regions[buf.place] = _region_of(buf, lay)
    return region


_PER_LAYOUT = 256  # entries a Layout keeps per cache before starting over


def _region_of(buf: Buffer, lay: Layout) -> Region:
    isz = lay.dtype.itemsize
    core = -1 if buf.core is None else buf.core
    if lay.size == 0:
        return Region(buf.space, core, buf.partition_start, 0, buf.byte_start, buf.byte_start)
    if not buf.on_chip:
        lo, hi = lay._span
        return Region("hbm", core, 0, 1, buf.byte_start + lo * isz, buf.byte_start + (hi + 1) * isz)
    f = buf.elems_per_partition(lay.dtype)
    p_lo, p_hi, f_lo, f_hi = onchip_span(lay, f)
    return Region(buf.space, core, buf.partition_start + p_lo, p_hi - p_lo + 1,
                  buf.byte_start + f_lo * isz, buf.byte_start + (f_hi + 1) * isz)


class View:
    """A typed, strided window onto a Buffer: what every instruction operand is.

    `read()` returns a copy in the dtype's storage type; `write(values)` casts with the
    hardware rounding of dtypes.cast and stores. NkiTensor (trnsim.nki) builds on this.
    """

    __slots__ = ("__weakref__", "buffer", "layout")

    def __init__(self, buffer: Buffer, layout: Layout):
        self.buffer = buffer
        self.layout = layout

    # -- NKI attributes
    @property
    def shape(self) -> tuple[int, ...]:
        return self.layout.shape

    @property
    def dtype(self) -> dt.DType:
        return self.layout.dtype

    @property
    def strides(self) -> tuple[int, ...]:
        return self.layout.strides

    @property
    def offset(self) -> int:
        return self.layout.offset

    @property
    def ndim(self) -> int:
        return len(self.layout.shape)

    @property
    def size(self) -> int:
        return self.layout.size

    @property
    def name(self) -> str:
        return self.buffer.name

    # -- data access
    def array(self) -> np.ndarray:
        """A live numpy view (no copy) of the elements, in storage type."""
        return strided_array(self.buffer, self.layout)

    def read(self) -> np.ndarray:
        return np.array(self.array(), copy=True)

    def read_f32(self) -> np.ndarray:
        """The values as the engines see them: converted to fp32 (NKI_PRECISE_FP=0: the fp32
        values kept where the bytes still hold them rounded, trnsim.wide_fp)."""
        raw = self.array()
        if self.buffer.wide is not None and wide_fp.ACTIVE:
            return wide_fp.overlay(self, raw, dt.to_float32(raw))
        return dt.to_float32(raw)

    def write(self, values: np.ndarray | float | int) -> None:
        """Store values (any numeric array broadcastable to the shape), cast to the dtype."""
        vals = np.asarray(values)
        if wide_fp.ACTIVE and wide_fp.keeps(self.dtype):
            wide_fp.keep(self, dt.to_float32(vals))
        if vals.dtype != self.dtype.storage or self.dtype.name == "tfloat32":
            vals = dt.cast(vals, self.dtype)
        if vals.shape != self.layout.shape:
            vals = np.broadcast_to(vals, self.layout.shape)
        if self.buffer.fresh or self.buffer.poison is not None:
            _overwriting(self.buffer, self.layout)
        self.array()[...] = vals

    def write_raw(self, values: np.ndarray) -> None:
        """Store values already in storage type, bit for bit."""
        if self.buffer.wide is not None and wide_fp.ACTIVE and wide_fp.keeps(self.dtype):
            wide_fp.keep(self, dt.to_float32(values))  # the kept values follow the bytes
        if self.buffer.fresh or self.buffer.poison is not None:
            np.broadcast_shapes(np.shape(values), self.layout.shape)  # raises before the drop
            _overwriting(self.buffer, self.layout)
        self.array()[...] = values

    def will_overwrite(self) -> None:
        """Every element of the view is about to be stored into (by code writing into
        `array()` directly): deferred poison that the store covers is not written first."""
        if self.buffer.fresh or self.buffer.poison is not None:
            _overwriting(self.buffer, self.layout)

    def region(self) -> Region:
        return region_of(self.buffer, self.layout)

    def partition_count(self) -> int:
        return self.layout.shape[0] if self.buffer.on_chip and self.layout.shape else 1

    def elems_per_partition(self) -> int:
        shape = self.layout.shape[1:] if self.buffer.on_chip else self.layout.shape
        return int(math.prod(shape))


def _overwriting(buf: Buffer, lay: Layout) -> None:
    """A write through `lay` is about to happen: if it covers every byte of a tile whose
    poison fill is still deferred, that fill is dropped (the write would overwrite it all);
    in HBM, the pending poison of the chunks a contiguous write covers."""
    isz = lay.dtype.itemsize
    dense = lay.strides == row_major(lay.shape)
    if not buf.on_chip:
        if dense and lay.size:
            lo = buf.byte_start + lay.offset * isz
            if buf.poison.overwrite(lo, lo + lay.size * isz):
                buf.poison = None
        return
    fills = buf.memory.fills
    if fills.fills:
        box = _dense_box(buf, lay)
        if box is not None:  # (else strided_array writes out the fills the write reaches)
            fills.overwrite(*box)
    if not fills.pending(buf.fresh):
        buf.fresh = 0


def _dense_box(buf: Buffer, lay: Layout) -> tuple[int, int, int, int] | None:
    """The on-chip box (partitions [q0, q1) x bytes [c0, c1) of the memory) whose every byte
    a write through `lay` sets: consecutive partitions, each one contiguous run of the same
    bytes; None for any other layout."""
    isz = lay.dtype.itemsize
    shape, strides = lay.shape, lay.strides
    if not shape or lay.size == 0 or buf.nbytes % isz:
        return None
    per_partition = buf.nbytes // isz
    if shape[0] > 1 and strides[0] != per_partition:
        return None
    run = 1
    for n, st in zip(reversed(shape[1:]), reversed(strides[1:]), strict=True):
        if n != 1 and st != run:
            return None
        run *= n
    p_off, f_off = divmod(lay.offset, per_partition)
    if f_off + run > per_partition:
        return None
    q0 = buf.partition_start + p_off
    c0 = buf.byte_start + f_off * isz
    return q0, q0 + shape[0], c0, c0 + run * isz
