"""nki.language (current API): dtypes, buffers, tensor creation, ranges, program identity.

The convenience wrappers (nl.add, nl.matmul, nl.softmax, ...) live in trnsim.nki.lang_ops and
are re-exported here; each lowers to nki.isa instructions.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from typing import Any

import numpy as np

from trnsim import dtypes as _dt
from trnsim.errors import ConstraintError
from trnsim.nki.context import current
from trnsim.nki.tensor import DynSlice, NkiTensor, as_dtype
from trnsim.program import capture_location

# ---------------------------------------------------------------- dtypes
float32 = _dt.float32
tfloat32 = _dt.resolve("tfloat32") if "tfloat32" in _dt.ALL else _dt.float32
bfloat16 = _dt.bfloat16
float16 = _dt.float16
int8, int16, int32 = _dt.int8, _dt.int16, _dt.int32
uint8, uint16, uint32 = _dt.uint8, _dt.uint16, _dt.uint32
bool_ = _dt.bool_
float8_e4m3 = _dt.float8_e4m3
float8_e5m2 = _dt.float8_e5m2
for _name in ("float8_e4m3fn", "float8_e8m0fnu", "float4_e2m1fn", "float8_e5m2_x4",
              "float8_e4m3fn_x4", "float4_e2m1fn_x4", "float32r"):
    if _name in _dt.ALL:
        globals()[_name] = _dt.ALL[_name]


# ---------------------------------------------------------------- buffers
class MemoryRegion(enum.Enum):
    """Where a tensor lives (nl.sbuf, nl.psum, nl.private_hbm, nl.shared_hbm; nl.hbm alias)."""

    sbuf = "sbuf"
    psum = "psum"
    private_hbm = "private_hbm"
    shared_hbm = "shared_hbm"

    def __repr__(self) -> str:
        return f"nl.{self.value}"


sbuf = MemoryRegion.sbuf
psum = MemoryRegion.psum
private_hbm = MemoryRegion.private_hbm
shared_hbm = MemoryRegion.shared_hbm
hbm = MemoryRegion.private_hbm


def _region(buffer: Any) -> MemoryRegion:
    if buffer is None:
        return sbuf
    if isinstance(buffer, MemoryRegion):
        return buffer
    kind = getattr(buffer, "memory_region", None)  # B1 allocator objects map onto regions
    if isinstance(kind, MemoryRegion):
        return kind
    raise ConstraintError(f"buffer={buffer!r} is not a buffer (use nl.sbuf, nl.psum, nl.hbm, "
                          "nl.private_hbm or nl.shared_hbm)", capture_location())


def is_hbm(buffer: Any) -> bool:
    return _region(buffer) in (private_hbm, shared_hbm)


def is_sbuf(buffer: Any) -> bool:
    return _region(buffer) is sbuf


def is_psum(buffer: Any) -> bool:
    return _region(buffer) is psum


def is_on_chip(buffer: Any) -> bool:
    return _region(buffer) in (sbuf, psum)


# ---------------------------------------------------------------- tensor creation
def ndarray(shape: Any, dtype: Any, buffer: Any = sbuf, name: str = "",
            address: tuple[int, int] | None = None) -> NkiTensor:
    """A new tensor; contents undefined (the simulator fills NaN / 4 to expose such reads)."""
    ctx = current("nl.ndarray")
    region = _region(buffer)
    dtype = as_dtype(dtype)
    shape = _shape_tuple(shape)
    loc = capture_location()
    try:
        if region in (sbuf, psum):
            view = ctx.core.allocate(region.value, shape, dtype, name, address)
        else:
            view = _allocate_hbm(ctx, region, shape, dtype, name)
    except ConstraintError as e:
        raise e.with_loc(loc) from None
    except Exception as e:
        from trnsim.errors import KernelError

        if isinstance(e, KernelError):
            raise e.with_loc(loc) from None
        raise
    return NkiTensor(view.buffer, view.layout)


def _allocate_hbm(ctx: Any, region: MemoryRegion, shape: tuple[int, ...], dtype: _dt.DType,
                  name: str) -> Any:
    if region is shared_hbm:
        # Shared HBM is one tensor for every program of the launch: programs after the first
        # get the allocation the first one made at the same point of the kernel.
        key = ctx.extra["shared_seq"]
        ctx.extra["shared_seq"] += 1
        shared = ctx.extra["shared_allocs"]
        if key not in shared:
            shared[key] = ctx.device.allocate_hbm(shape, dtype, name, "shared_hbm")
        return shared[key]
    return ctx.device.allocate_hbm(shape, dtype, name, "private_hbm", ctx.core.index)


def _shape_tuple(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    try:
        return tuple(int(s) for s in shape)
    except TypeError as e:
        raise ConstraintError(f"shape {shape!r} is not a tuple of integers",
                              capture_location()) from e


# ---------------------------------------------------------------- ranges
class _Range:
    """A loop iterator that records its nesting (loop id, kind, iteration) for the program record."""

    def __init__(self, kind: str, start: int, stop: int | None = None, step: int = 1):
        if stop is None:
            start, stop = 0, start
        self.kind = kind
        self.range = range(int(start), int(stop), int(step))

    def __len__(self) -> int:
        return len(self.range)

    def __iter__(self) -> Iterator[int]:
        ctx = current(f"nl.{self.kind}")
        loop_id = ctx.next_loop_id
        ctx.next_loop_id += 1
        depth = len(ctx.loops)
        try:
            for i in self.range:
                del ctx.loops[depth:]
                ctx.loops.append((loop_id, self.kind, i))
                yield i
        finally:
            del ctx.loops[depth:]


def affine_range(start: int, stop: int | None = None, step: int = 1) -> _Range:
    """Iterations with no loop-carried dependency (the compiler may overlap them)."""
    return _Range("affine_range", start, stop, step)


def sequential_range(start: int, stop: int | None = None, step: int = 1) -> _Range:
    """Iterations in order; loop-carried dependencies allowed."""
    return _Range("sequential_range", start, stop, step)


def static_range(start: int, stop: int | None = None, step: int = 1) -> _Range:
    """Fully unrolled at trace time."""
    return _Range("static_range", start, stop, step)


def ds(start: int, size: int) -> DynSlice:
    """Dynamic slice: `size` elements from `start`."""
    return DynSlice(start, size)


# ---------------------------------------------------------------- program identity
def program_id(axis: int = 0) -> int:
    ctx = current("nl.program_id")
    if not ctx.program_id:
        return 0
    if not 0 <= axis < len(ctx.program_id):
        raise ConstraintError(f"nl.program_id: axis {axis} is outside the launch grid of rank "
                              f"{len(ctx.program_id)}", capture_location())
    return ctx.program_id[axis]


def num_programs(axes: Any = None) -> int:
    ctx = current("nl.num_programs")
    grid = ctx.grid or (1,)
    if axes is None:
        return int(np.prod(grid))
    if isinstance(axes, int):
        axes = (axes,)
    n = 1
    for a in axes:
        if not 0 <= a < len(grid):
            raise ConstraintError(f"nl.num_programs: axis {a} is outside the launch grid of rank "
                                  f"{len(grid)}", capture_location())
        n *= grid[a]
    return n


def program_ndim() -> int:
    return len(current("nl.program_ndim").grid)


# ---------------------------------------------------------------- tile sizes
class _TileSize:
    """nl.tile_size: hardware tile limits of the target chip (read at access time)."""

    def __getattr__(self, name: str) -> int:
        from trnsim.nki.context import maybe_current
        from trnsim.nki.runner import resolve_chip

        ctx = maybe_current()
        chip = ctx.chip if ctx is not None else resolve_chip(None)
        try:
            return chip.tile_size[name]
        except KeyError:
            raise AttributeError(f"nl.tile_size has no attribute {name!r} (known: "
                                 f"{', '.join(sorted(chip.tile_size))})") from None


tile_size = _TileSize()
