"""Device loops: nl.dynamic_range (B2/GA <= 0.6), nl.fori_loop and nl.while_loop (0.6+).

On hardware the compiler emits the body once and the engines loop on a register. Here kernels
run as Python, so the body runs once per runtime iteration, with the bounds read from their
registers when the loop starts. Each condition test is recorded as a `loop_branch` instruction
(which also sets the induction register), and the iterations carry the loop context
(loop id, kind, iteration) like nl.affine_range. Python side effects in the body therefore
happen once per iteration, not once as under the NKI compiler.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from trnsim.errors import ConstraintError
from trnsim.nki._isa_base import _issue
from trnsim.nki.context import KernelContext, current
from trnsim.nki.registers import NkiScalar, VirtualRegister, new_register
from trnsim.program import capture_location

__all__ = ["dynamic_range", "fori_loop", "while_loop"]


def _bound(x: Any, what: str) -> int:
    if isinstance(x, VirtualRegister):
        return x.value
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return int(x)
    raise ConstraintError(
        f"{what} must be an int or a register, got {type(x).__name__} {x!r}", capture_location()
    )


def _step(step: Any, what: str) -> int:
    if isinstance(step, (int, np.integer)) and not isinstance(step, bool) and step > 0:
        return int(step)
    raise ConstraintError(
        f"{what}: step={step!r} must be a compile-time positive integer "
        "(device loops count up only)",
        capture_location(),
    )


@contextmanager
def _loop_scope(ctx: KernelContext) -> Iterator[tuple[int, int]]:
    """Allocate a loop id and restore the loop nest on exit."""
    loop_id = ctx.next_loop_id
    ctx.next_loop_id += 1
    depth = len(ctx.loops)
    try:
        yield loop_id, depth
    finally:
        del ctx.loops[depth:]


def _enter(ctx: KernelContext, depth: int, loop_id: int, kind: str, i: int) -> None:
    del ctx.loops[depth:]
    ctx.loops.append((loop_id, kind, i))


def _counted(kind: str, start: Any, stop: Any, step: Any, read_only: bool) -> Iterator[NkiScalar]:
    ctx = current(f"nl.{kind}")
    lo = _bound(start, f"nl.{kind}: start")
    hi = _bound(stop, f"nl.{kind}: stop")
    st = _step(step, f"nl.{kind}")
    counter = new_register(NkiScalar, read_only=read_only)
    with _loop_scope(ctx) as (loop_id, depth):
        for n, i in enumerate(range(lo, hi, st)):
            _issue(
                "loop_branch",
                None,
                counter=counter,
                kind=kind,
                value=i,
                taken=True,
                iteration=n,
                loop_id=loop_id,
            )
            _enter(ctx, depth, loop_id, kind, n)
            yield counter
        del ctx.loops[depth:]
        _issue(
            "loop_branch",
            None,
            counter=counter,
            kind=kind,
            value=hi,
            taken=False,
            iteration=len(range(lo, hi, st)),
            loop_id=loop_id,
        )


def dynamic_range(start: Any, stop: Any = None, step: int = 1) -> Iterator[NkiScalar]:
    """A device loop; start/stop are ints or registers, step a positive int. Yields the
    induction variable as a read-only register (usable as scalar_offset)."""
    if stop is None:
        start, stop = 0, start
    return _counted("dynamic_range", start, stop, step, read_only=True)


def fori_loop(lower: Any, upper: Any, body_fun: Callable[[Any], Any], step: int = 1) -> None:
    """Call body_fun(i) for i in range(lower, upper, step) on device; i is a register passed
    by value (writing it does not change the loop)."""
    if not callable(body_fun):
        raise ConstraintError(
            f"nl.fori_loop: body_fun must be callable, got {body_fun!r}", capture_location()
        )
    for i in _counted("fori_loop", lower, upper, step, read_only=False):
        body_fun(i)


def while_loop(init: Any, body_fun: Callable[[Any], Any]) -> None:
    """r = init; while r != 0: r = body_fun(r) — a true while loop on a register."""
    ctx = current("nl.while_loop")
    if not isinstance(init, VirtualRegister):
        raise ConstraintError(
            f"nl.while_loop: init must be a register, got {type(init).__name__} {init!r}",
            capture_location(),
        )
    if not callable(body_fun):
        raise ConstraintError(
            f"nl.while_loop: body_fun must be callable, got {body_fun!r}", capture_location()
        )
    r = init
    with _loop_scope(ctx) as (loop_id, depth):
        n = 0
        while True:
            taken = r.value != 0
            _issue(
                "loop_branch",
                None,
                kind="while_loop",
                value=0,
                taken=taken,
                iteration=n,
                loop_id=loop_id,
                register=r.name,
            )
            if not taken:
                break
            _enter(ctx, depth, loop_id, "while_loop", n)
            r = body_fun(r)
            if not isinstance(r, VirtualRegister):
                raise ConstraintError(
                    f"nl.while_loop: body_fun must return the next condition register, got "
                    f"{type(r).__name__} {r!r}",
                    capture_location(),
                )
            del ctx.loops[depth:]
            n += 1
