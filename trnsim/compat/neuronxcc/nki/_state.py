"""Per-launch Beta-1 front-end state (one per program, in KernelContext.extra) and the `api`
decorator every nl/nisa entry point goes through.

The state holds the one pending value-returning result (see _emit), the stack of active B1
loops with the program positions where their activation and current iteration began, the
affine_range dependency tracker, and what the kernel wrote to HBM.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trnsim.compat.neuronxcc.nki._errors import b1_error
from trnsim.errors import KernelError
from trnsim.nki.context import KernelContext, maybe_current
from trnsim.program import SourceLocation, capture_location, declaration_site


@dataclass
class LoopFrame:
    """An active B1 loop: its id in ctx.loops, kind, and where (program index) its current
    activation and its current iteration began."""

    loop_id: int
    kind: str
    start: int
    iter_start: int
    iteration: int = 0
    loc: SourceLocation | None = None
    closed: bool = False  # the loop has finished: tensors created inside are out of scope
    allocated: list = field(default_factory=list)  # weakrefs to this iteration's tiles


@dataclass
class B1State:
    """Front-end state of one running B1 program."""

    pending: Any = None  # the tensor whose instruction waits for its destination (see _emit)
    loops: list[LoopFrame] = field(default_factory=list)
    tracker: Any = None  # _deps.Tracker, created on the first affine_range
    hbm_written: weakref.WeakSet = field(default_factory=weakref.WeakSet)
    immutable: dict[int, str] = field(default_factory=dict)  # id(Buffer) -> parameter name
    immutable_writes: list[tuple[str, SourceLocation | None]] = field(default_factory=list)
    depth: int = 0  # > 0 while a front-end call is running (nested calls do not re-flush)
    direct_alloc: bool = False  # an ncc direct allocator was used (an "allocated kernel")
    scope: weakref.WeakKeyDictionary = field(default_factory=weakref.WeakKeyDictionary)
    placement: Any = None  # _placement.Placement of the launch: how block tensors are placed

    def flush(self) -> None:
        """Materialize the pending result (if any) into a fresh tile."""
        pending, self.pending = self.pending, None
        if pending is not None:
            pending._materialize()

    def enter_scope(self, buf: Any) -> None:
        """Remember the loop iteration a new on-chip tensor was created in."""
        if self.loops:
            frame = self.loops[-1]
            self.scope[buf] = (frame, frame.iteration)
            frame.allocated.append(weakref.ref(buf))

    def end_iteration(self, frame: LoopFrame) -> None:
        """Free the tiles created in the iteration that just ended: in B1 they are local to
        the loop body (a later iteration or the code after the loop cannot name them), and
        the compiler reuses their memory. Python may still hold them; using one raises
        err_local_variable_used_out_of_scope."""
        for ref in frame.allocated:
            buf = ref()
            if buf is not None:
                buf.release()
        frame.allocated.clear()

    def check_scope(self, buf: Any, name: str) -> None:
        """err_local_variable_used_out_of_scope for a tile of a finished loop iteration."""
        entry = self.scope.get(buf)
        if entry is None:
            return
        frame, iteration = entry
        if frame.closed or frame.iteration != iteration:
            where = f" (created in the loop at {frame.loc.short()})" if frame.loc else ""
            raise b1_error(
                KernelError,
                "err_local_variable_used_out_of_scope",
                f"Local variable '{name or '?'}' is referenced outside of its parent "
                f"scope{where}; declare it before the loop and assign into it with "
                f"{name or 'tile'}[...] = ...",
            )

    def affine_frames(self) -> list[LoopFrame]:
        return [f for f in self.loops if f.kind == "affine_range"]


def state_of(ctx: KernelContext) -> B1State:
    st = ctx.extra.get("b1")
    if st is None:
        st = ctx.extra["b1"] = B1State()
    return st


def context(api_name: str) -> tuple[KernelContext, B1State]:
    """The running kernel and its B1 state; outside a kernel, err_nki_api_outside_of_nki_kernel."""
    ctx = maybe_current()
    if ctx is None:
        raise b1_error(
            KernelError,
            "err_nki_api_outside_of_nki_kernel",
            f"{api_name}: calling NKI API outside of NKI kernels is not supported "
            "(run the kernel through nki.jit, nki.simulate_kernel or nki.baremetal)",
            capture_location(),
        )
    return ctx, state_of(ctx)


def declaration(ctx: KernelContext) -> tuple:
    """The declaration a tile made here belongs to, as the Beta-1 compiler sees the kernel:
    the call site (declaration_site) and the iteration of every enclosing affine_range and
    static_range; a sequential_range's iteration and a Python loop's (the compiler replaces
    Python `range` by sequential_range) are not part of it, so their iterations declare the
    same tile again (TileRecord.decl; the timing rule sequential_buffers reads it)."""
    return (declaration_site(),
            tuple(None if kind == "sequential_range" else i for _, kind, i in ctx.loops))


def here() -> tuple[SourceLocation | None, tuple]:
    """The user's source line and the current loop nest (for the instruction record)."""
    ctx = maybe_current()
    return capture_location(), tuple(ctx.loops) if ctx is not None else ()


def api(name: str, flush: bool = True) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Wrap a B1 entry point: require a running kernel, materialize the pending result first,
    and attach the user's line to any KernelError."""

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            _, st = context(name)
            if flush and st.depth == 0:
                st.flush()
            st.depth += 1
            try:
                return fn(*args, **kwargs)
            except KernelError as e:
                raise e.with_loc(capture_location()) from None
            finally:
                st.depth -= 1

        wrapper.nki_api = name  # type: ignore[attr-defined]
        return wrapper

    return deco
