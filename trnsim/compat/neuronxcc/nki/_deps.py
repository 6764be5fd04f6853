"""affine_range independence check: element-precise write stamps per Buffer.

The B1 compiler assumes the iterations of an `nl.affine_range` loop are independent (it may
reorder or overlap them). trnsim executes every iteration in order, so a kernel that breaks
the assumption would silently compute the sequential answer; this tracker raises instead.

While an affine_range is active, every instruction's written elements get a stamp (the
instruction's program index + 1, negated for accumulations such as `psum += matmul`). A read
of an element whose last stamp falls in [start, iter_start) of an active affine loop (written
by an earlier iteration of the same activation of that loop) is a loop-carried dependency; a
write over such an element is an output dependency, except accumulation over accumulation
(err_unexpected_output_dependencies). Stamps live in lazily created int32 shadows, one per
Buffer (so a tile re-allocated in every iteration starts clean), at the granularity of the
first dtype that wrote it; accesses at another granularity are not tracked. Knows nothing
about values.

Most shadows never need their array: a tile written whole holds one stamp (`uniform`), and a
multi-tile buffer written block by block (`t[k, ...] = load(...)`) holds one stamp per block
(`pieces`, while the blocks' bounding boxes are disjoint). Checks and stamps are then scalar
work; the array is filled in only when a write or read falls across blocks.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from trnsim.compat.neuronxcc.nki._errors import b1_error
from trnsim.compat.neuronxcc.nki._state import LoopFrame
from trnsim.errors import ConstraintError
from trnsim.memory import Buffer, Layout, View
from trnsim.program import Instruction, Region, SourceLocation

_Pieces = dict[Layout, tuple[Region, int, bool]]  # layout -> (bounding box, stamp, dense)


class _Shadow:
    """The stamps of one Buffer, at granularity `g` bytes, in one of three forms:

    - `uniform` is set: every element holds that one stamp (a tile written whole);
    - `pieces` is set: elements of each piece's layout hold the piece's stamp, the pieces'
      bounding boxes are pairwise disjoint, and every other element holds `base` (a piece
      is `dense` when its layout covers its whole bounding box);
    - neither: `arr` holds each element's stamp.
    """

    __slots__ = ("_arr", "base", "g", "pieces", "shape", "size", "uniform")

    def __init__(self, shape: tuple[int, ...], g: int) -> None:
        self.shape, self.size, self.g, self.uniform = shape, math.prod(shape), g, 0
        self.base = 0
        self.pieces: _Pieces | None = None
        self._arr: np.ndarray | None = None  # made when the stamps stop being summaries

    @property
    def arr(self) -> np.ndarray:
        if self._arr is None:
            self._arr = np.empty(self.shape, dtype=np.int32)
        return self._arr


# Keep the uniform/pieces summaries (tests switch this off to get element-precise stamps).
_SUMMARIES = True


class Tracker:
    """Write stamps of the buffers written inside affine_range loops. Each Buffer carries its
    shadows, one per tracker (so they go when the buffer goes)."""

    def _shadow(self, view: View, create: bool) -> _Shadow | None:
        buf, lay = view.buffer, view.layout
        shadows = buf.__dict__.get("_b1_stamps")
        sh = shadows.get(self) if shadows is not None else None
        if sh is None:
            if not create or lay.size == 0:
                return None
            g = lay.dtype.itemsize
            shape = (buf.partitions, buf.nbytes // g) if buf.on_chip else (buf.nbytes // g,)
            if shadows is None:
                shadows = buf.__dict__["_b1_stamps"] = {}
            sh = shadows[self] = _Shadow(shape, g)
        return sh

    def _stamps(self, sh: _Shadow, view: View) -> np.ndarray | None:
        """A strided int32 view of the stamps of the view's elements (None if untracked: a
        view not aligned to the shadow's granularity)."""
        return _stamp_array(sh, view.buffer, view.layout)

    def _hit(
        self, frames: list[LoopFrame], view: View, accumulate_ok: bool
    ) -> tuple[LoopFrame, int] | None:
        sh = self._shadow(view, create=False)
        if sh is None:
            return None
        if sh.uniform is not None or sh.pieces is not None:
            if view.layout.size == 0 or not _aligned(sh, view):
                return None
            stamp = sh.uniform
            if stamp is None:
                stamp = _piece_stamp(sh.pieces, sh.base, view)
            if stamp is not None:
                return _uniform_hit(frames, stamp, accumulate_ok)
            _materialize(sh, view.buffer)  # the view falls across pieces
        stamps = self._stamps(sh, view)
        return None if stamps is None else _earliest_hit(frames, stamps, accumulate_ok)

    def check(
        self,
        frames: list[LoopFrame],
        opcode: str,
        reads: Mapping[str, View],
        writes: Mapping[str, View],
        rmw: bool,
        program: list[Instruction],
        loc: SourceLocation | None,
    ) -> None:
        """Raise if this instruction reads or overwrites a value of an earlier iteration."""
        for name, view in reads.items():
            if rmw and any(_same(view, w) for w in writes.values()):
                continue  # the accumulation target read by `t += x` / loop_reduce
            hit = self._hit(frames, view, accumulate_ok=False)
            if hit is not None:
                raise _carried(opcode, name, view, hit, program, loc)
        for name, view in writes.items():
            hit = self._hit(frames, view, accumulate_ok=rmw)
            if hit is not None:
                raise _output_dep(opcode, name, view, hit, program, loc)

    def stamp(self, writes: Mapping[str, View], index: int, rmw: bool) -> None:
        value = -(index + 1) if rmw else index + 1
        for view in writes.values():
            sh = self._shadow(view, create=True)
            if sh is None:
                continue
            if _SUMMARIES and _whole(sh, view):
                sh.uniform, sh.pieces = value, None
                continue
            if _SUMMARIES and _add_piece(sh, view, value):
                continue
            _materialize(sh, view.buffer)
            stamps = self._stamps(sh, view)
            if stamps is not None:
                stamps[...] = value


def _add_piece(sh: _Shadow, view: View, value: int) -> bool:
    """Record a write of `value` over `view` as a piece, if the summary can hold it: the view
    is one already recorded, or its bounding box is clear of every recorded piece."""
    lay = view.layout
    if lay.size == 0 or lay.dtype.itemsize != sh.g or not _aligned(sh, view):
        return False
    if sh.uniform is not None:
        sh.base, sh.uniform, sh.pieces = sh.uniform, None, {}
    pieces = sh.pieces
    if pieces is None:
        return False
    hit = pieces.get(lay)
    region = view.region()
    if hit is None and any(region.overlaps(p[0]) for p in pieces.values()):
        return False
    pieces[lay] = (region, value, _dense(lay, region, sh.g))
    return True


def _dense(lay: Layout, region: Region, g: int) -> bool:
    """The layout covers every granule of its bounding box (once each)."""
    if any(n > 1 and st == 0 for n, st in zip(lay.shape, lay.strides, strict=True)):
        return False
    return lay.size == region.partitions * ((region.byte_end - region.byte_start) // g)


def _piece_stamp(pieces: _Pieces, base: int, view: View) -> int | None:
    """The one stamp every element of `view` holds under `pieces` (other elements: `base`),
    or None if it falls across pieces (or over part of a strided one)."""
    hit = pieces.get(view.layout)
    if hit is not None:
        return hit[1]
    region = view.region()
    over = [p for p in pieces.values() if region.overlaps(p[0])]
    if not over:
        return base
    if len(over) == 1 and over[0][2] and _inside(region, over[0][0]):
        return over[0][1]  # a part of one block written whole
    return None


def _inside(a: Region, b: Region) -> bool:
    return (
        b.partition_start <= a.partition_start
        and a.partition_start + a.partitions <= b.partition_start + b.partitions
        and b.byte_start <= a.byte_start
        and a.byte_end <= b.byte_end
    )


def _materialize(sh: _Shadow, buf: Buffer) -> None:
    """Write the summary out into `sh.arr`, which becomes the truth."""
    if sh.uniform is not None:
        sh.arr.fill(sh.uniform)
        sh.uniform = None
    elif sh.pieces is not None:
        sh.arr.fill(sh.base)
        for lay, (_, value, _) in sh.pieces.items():
            stamps = _stamp_array(sh, buf, lay)
            if stamps is not None:
                stamps[...] = value
        sh.pieces = None


def _stamp_array(sh: _Shadow, buf: Buffer, lay: Layout) -> np.ndarray | None:
    """A strided int32 view of `sh.arr` at the layout's elements (None if untracked)."""
    arr, g = sh.arr, sh.g
    s = lay.dtype.itemsize
    if lay.size == 0:
        return None
    if buf.on_chip:
        f = buf.elems_per_partition(lay.dtype)
        p_off, f_off = divmod(lay.offset, f)
        if (f_off * s) % g:
            return None
        start = p_off * arr.strides[0] + ((f_off * s) // g) * arr.strides[1]
        strides = []
        for st in lay.strides:
            ps, fs = (st // f, 0) if f and st and st % f == 0 else (0, st)
            if (fs * s) % g:
                return None
            strides.append(ps * arr.strides[0] + (fs * s // g) * arr.strides[1])
    else:
        if (lay.offset * s) % g or any((st * s) % g for st in lay.strides):
            return None
        start = ((lay.offset * s) // g) * arr.strides[0]
        strides = [(st * s // g) * arr.strides[0] for st in lay.strides]
    # np.ndarray over the buffer checks the extent (as_strided would not: a stray stride
    # would write outside the array).
    return np.ndarray(lay.shape, arr.dtype, buffer=arr, offset=start, strides=tuple(strides))


def _aligned(sh: _Shadow, view: View) -> bool:
    """The view's elements fall on the shadow's granularity (else it is not tracked)."""
    buf, lay = view.buffer, view.layout
    s, g = lay.dtype.itemsize, sh.g
    if buf.on_chip:
        f = buf.elems_per_partition(lay.dtype)
        if (lay.offset % f * s) % g if f else (lay.offset * s) % g:
            return False
        return all((f and st and st % f == 0) or (st * s) % g == 0 for st in lay.strides)
    return not (lay.offset * s) % g and not any((st * s) % g for st in lay.strides)


def _whole(sh: _Shadow, view: View) -> bool:
    """The view is exactly every element of its buffer, each once, at the shadow's
    granularity: a dense row-major layout over the whole buffer."""
    buf, lay = view.buffer, view.layout
    if lay.dtype.itemsize != sh.g or lay.offset != 0 or lay.size != sh.size:
        return False
    expect = 1
    for n, st in zip(reversed(lay.shape), reversed(lay.strides), strict=True):
        if n != 1 and st != expect:
            return False
        expect *= n
    return not buf.on_chip or (bool(lay.shape) and lay.shape[0] == buf.partitions)


def _uniform_hit(
    frames: list[LoopFrame], stamp: int, accumulate_ok: bool
) -> tuple[LoopFrame, int] | None:
    """_earliest_hit for stamps that all hold `stamp`."""
    if stamp == 0 or (accumulate_ok and stamp < 0):
        return None
    idx = abs(stamp) - 1
    for f in reversed(frames):
        if f.start <= idx < f.iter_start:
            return f, idx
    return None


def _same(a: View, b: View) -> bool:
    return a.buffer is b.buffer and a.layout == b.layout


def _earliest_hit(
    frames: list[LoopFrame], stamps: np.ndarray, accumulate_ok: bool
) -> tuple[LoopFrame, int] | None:
    """(loop, writer instruction index) of a stamp from an earlier iteration, innermost first."""
    if not stamps.size:
        return None
    lo, hi = int(stamps.min()), int(stamps.max())
    newest = max(abs(lo), abs(hi)) - 1
    if newest < min(f.start for f in frames):  # every stamp predates the loops (common)
        return None
    if not any(f.start < f.iter_start for f in frames):  # first iterations only
        return None
    live = stamps[stamps != 0]
    if not live.size:
        return None
    if accumulate_ok:
        live = live[live > 0]
        if not live.size:
            return None
    idx = np.abs(live.astype(np.int64)) - 1
    for f in reversed(frames):
        sel = idx[(idx >= f.start) & (idx < f.iter_start)]
        if sel.size:
            return f, int(sel.max())
    return None


def _writer(program: list[Instruction], index: int, frame: LoopFrame) -> str:
    instr = program[index] if 0 <= index < len(program) else None
    if instr is None:
        return ""
    it = next((i for lid, _, i in instr.loops if lid == frame.loop_id), "?")
    where = f" at {instr.loc.short()}" if instr.loc is not None else ""
    return f" (written by {instr.opcode}{where} in iteration {it})"


def _loop_name(frame: LoopFrame) -> str:
    where = f" at {frame.loc.short()}" if frame.loc is not None else ""
    return f"nl.affine_range{where}"


def _carried(
    opcode: str,
    name: str,
    view: View,
    hit: tuple[LoopFrame, int],
    program: list[Instruction],
    loc: SourceLocation | None,
) -> Any:
    frame, index = hit
    return b1_error(
        ConstraintError,
        "err_loop_carried_dependency",
        f"{opcode}: operand '{name}' reads `{view.buffer.name or '?'}` values written by an "
        f"earlier iteration of {_loop_name(frame)}{_writer(program, index, frame)}; iteration "
        f"{frame.iteration} depends on it, but affine_range iterations must be independent "
        "(the compiler may run them in any order). Use nl.sequential_range for a loop-carried "
        "dependency, or accumulate with += / nl.loop_reduce",
        loc,
    )


def _output_dep(
    opcode: str,
    name: str,
    view: View,
    hit: tuple[LoopFrame, int],
    program: list[Instruction],
    loc: SourceLocation | None,
) -> Any:
    frame, index = hit
    return b1_error(
        ConstraintError,
        "err_unexpected_output_dependencies",
        f"{opcode}: operand '{name}' overwrites `{view.buffer.name or '?'}` locations already "
        f"written by an earlier iteration of {_loop_name(frame)}{_writer(program, index, frame)}"
        f" (iteration {frame.iteration} writes them again); affine_range iterations must write "
        "disjoint locations. Index the destination with the loop variable, allocate it inside "
        "the loop, or use nl.sequential_range",
        loc,
    )
