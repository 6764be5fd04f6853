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
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from trnsim.compat.neuronxcc.nki._errors import b1_error
from trnsim.compat.neuronxcc.nki._state import LoopFrame
from trnsim.errors import ConstraintError
from trnsim.memory import View
from trnsim.program import Instruction, SourceLocation


class _Shadow:
    """The stamps of one Buffer, at granularity `g` bytes. `uniform` is set while every element
    holds that one stamp (a tile written whole, as loops mostly do): checks and stamps are then
    scalar work, and `arr` is brought up to date only when a part is written."""

    __slots__ = ("_arr", "g", "shape", "size", "uniform")

    def __init__(self, shape: tuple[int, ...], g: int) -> None:
        self.shape, self.size, self.g, self.uniform = shape, math.prod(shape), g, 0
        self._arr: np.ndarray | None = None  # made when a part is first written

    @property
    def arr(self) -> np.ndarray:
        if self._arr is None:
            self._arr = np.empty(self.shape, dtype=np.int32)
        return self._arr


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
        buf, lay = view.buffer, view.layout
        arr, g = sh.arr, sh.g
        s = lay.dtype.itemsize
        if lay.size == 0:
            return None
        if buf.on_chip:
            f = buf.elems_per_partition(lay.dtype)
            p_off, f_off = divmod(lay.offset, f)
            if (f_off * s) % g:
                return None
            anchor = arr[p_off, (f_off * s) // g :]
            strides = []
            for st in lay.strides:
                ps, fs = (st // f, 0) if f and st and st % f == 0 else (0, st)
                if (fs * s) % g:
                    return None
                strides.append(ps * arr.strides[0] + (fs * s // g) * arr.strides[1])
        else:
            if (lay.offset * s) % g or any((st * s) % g for st in lay.strides):
                return None
            anchor = arr[(lay.offset * s) // g :]
            strides = [(st * s // g) * arr.strides[0] for st in lay.strides]
        return np.lib.stride_tricks.as_strided(anchor, shape=lay.shape, strides=tuple(strides))

    def _hit(
        self, frames: list[LoopFrame], view: View, accumulate_ok: bool
    ) -> tuple[LoopFrame, int] | None:
        sh = self._shadow(view, create=False)
        if sh is None:
            return None
        if sh.uniform is not None:
            if view.layout.size == 0 or not _aligned(sh, view):
                return None
            return _uniform_hit(frames, sh.uniform, accumulate_ok)
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
            if _whole(sh, view):
                sh.uniform = value
                continue
            if sh.uniform is not None:
                sh.arr.fill(sh.uniform)  # a part changes: the array becomes the truth
                sh.uniform = None
            stamps = self._stamps(sh, view)
            if stamps is not None:
                stamps[...] = value


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
