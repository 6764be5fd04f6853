"""Beta-1 loop iterators: nl.affine_range, nl.sequential_range, nl.static_range.

The B1 tracer executes a loop body once and the compiler unrolls or pipelines it later; trnsim
runs the body once per iteration, in order, so plain Python side effects inside a loop happen
once per iteration here (a counter incremented in an 8-trip affine_range ends at 8, not 1),
while every NKI value is what the hardware computes. Python `range` in a kernel behaves as
sequential_range, as in B1.

Each iteration carries (loop id, kind, iteration) in the instruction record, flushes the
pending result first (so an instruction belongs to the iteration that issued it), and, for
affine_range, marks where the iteration begins for the dependency tracker (_deps).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from trnsim.compat.neuronxcc.nki._deps import Tracker
from trnsim.compat.neuronxcc.nki._state import LoopFrame, context
from trnsim.errors import ConstraintError
from trnsim.program import capture_location


def _bound(v: Any) -> int:
    """A loop bound: an int (NumPy ints and integral floats such as N / 128 too); a
    fractional bound would silently drop the ragged tail, so it is an error."""
    if isinstance(v, (float, np.floating)) and not float(v).is_integer():
        raise ValueError(f"{v!r} is not integral (use // or math.ceil)")
    return int(v)


class B1Range:
    """An iterable of ints that records its iterations in the kernel's loop nest."""

    def __init__(self, kind: str, start: Any, stop: Any = None, step: Any = 1,
                 directives: Any = None):
        self.directives = _directives(kind, directives)
        if stop is None:
            start, stop = 0, start
        try:
            self.range = range(_bound(start), _bound(stop), _bound(step))
        except (TypeError, ValueError) as e:
            raise ConstraintError(
                f"nl.{kind}: bounds must be integers, got ({start!r}, {stop!r}, {step!r}): {e}",
                capture_location(),
            ) from e
        self.kind = kind

    def __len__(self) -> int:
        return len(self.range)

    def __repr__(self) -> str:
        r = self.range
        return f"nl.{self.kind}({r.start}, {r.stop}, {r.step})"

    def __iter__(self) -> Iterator[int]:
        if not self.directives:
            yield from self._iterations()
            return
        with contextlib.ExitStack() as stack:  # e.g. ncc.no_reorder() around the whole loop
            for d in self.directives:
                stack.enter_context(d)
            yield from self._iterations()

    def _iterations(self) -> Iterator[int]:
        ctx, st = context(f"nl.{self.kind}")
        loc = capture_location()
        st.flush()
        loop_id = ctx.next_loop_id
        ctx.next_loop_id += 1
        depth = len(ctx.loops)
        start = len(ctx.device.program)
        frame = LoopFrame(loop_id, self.kind, start, start, loc=loc)
        if self.kind == "affine_range" and st.tracker is None:
            st.tracker = Tracker()
        st.loops.append(frame)
        try:
            for n, i in enumerate(self.range):
                st.flush()
                if n:
                    st.end_iteration(frame)
                del ctx.loops[depth:]
                ctx.loops.append((loop_id, self.kind, i))
                frame.iter_start = len(ctx.device.program)
                frame.iteration = i
                yield i
            st.flush()
        finally:
            del ctx.loops[depth:]
            frame.closed = True
            st.end_iteration(frame)
            if frame in st.loops:
                st.loops.remove(frame)


def _directives(kind: str, directives: Any) -> tuple:
    """A loop's `directives=`: a compiler directive (`ncc.no_reorder()`, as AWS's attention
    tutorial passes to sequential_range) or a list of them, entered around the whole loop."""
    if directives is None:
        return ()
    items = tuple(directives) if isinstance(directives, (list, tuple)) else (directives,)
    for d in items:
        if not (hasattr(d, "__enter__") and hasattr(d, "__exit__")):
            raise ConstraintError(
                f"nl.{kind}: directives={d!r} is not a compiler directive (allowed: "
                "nki.compiler.no_reorder(), or a list of directives)", capture_location())
    return items


def affine_range(start: Any, stop: Any = None, step: Any = 1, directives: Any = None) -> B1Range:
    """Iterations assumed independent (the compiler may reorder or overlap them); trnsim runs
    them in order and raises if one reads or overwrites another's values."""
    return B1Range("affine_range", start, stop, step, directives)


def sequential_range(start: Any, stop: Any = None, step: Any = 1,
                     directives: Any = None) -> B1Range:
    """Iterations in order; loop-carried dependencies allowed."""
    return B1Range("sequential_range", start, stop, step, directives)


def static_range(start: Any, stop: Any = None, step: Any = 1, directives: Any = None) -> B1Range:
    """Fully unrolled at trace time (behaves as sequential_range here)."""
    return B1Range("static_range", start, stop, step, directives)
