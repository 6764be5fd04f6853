"""neuronxcc.nki.compiler (ncc, NKI Beta 1): direct allocation and kernel decorators.

`ncc.sbuf.alloc(func)`, `ncc.sbuf.mod_alloc(base_addr, base_partition=0, num_par_tiles=(),
num_free_tiles=())`, `ncc.sbuf.auto_alloc()` and the `ncc.psum` equivalents are buffers for
nl.ndarray (see _buffers for how their addresses are honoured). The decorators
(skip_middle_end_transformations, enable_stack_allocator, force_auto_alloc) steer compiler
passes that do not exist here: they return the kernel unchanged. allocation_scope and
multi_buffer are accepted as no-op context managers / decorators; no_reorder keeps its block in
program order in the timing model.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from trnsim.compat.neuronxcc.nki._buffers import psum_allocators as psum
from trnsim.compat.neuronxcc.nki._buffers import sbuf_allocators as sbuf
from trnsim.compat.neuronxcc.nki._state import context
from trnsim.nki.context import scoped_marker


def _passthrough(name: str) -> Callable[..., Any]:
    def decorator(fn: Any = None, **kwargs: Any) -> Any:
        if fn is None or not callable(fn):
            return lambda f: f
        return fn

    decorator.__name__ = name
    decorator.__doc__ = (
        f"@ncc.{name}: a compiler-pass switch; the kernel runs unchanged in the simulator."
    )
    return decorator


skip_middle_end_transformations = _passthrough("skip_middle_end_transformations")
enable_stack_allocator = _passthrough("enable_stack_allocator")
force_auto_alloc = _passthrough("force_auto_alloc")


class _Scope(contextlib.ContextDecorator):
    """A no-op scope usable as `with ...:` or as a decorator."""

    def __enter__(self) -> _Scope:
        return self

    def __exit__(self, *exc: Any) -> bool:
        return False


def allocation_scope(*args: Any, **kwargs: Any) -> _Scope:
    """A scope for direct allocations (no effect in the simulator)."""
    return _Scope()


def multi_buffer(factor: int = 2) -> _Scope:
    """Multi-buffering hint (the simulator's allocator already rotates addresses)."""
    return _Scope()


@contextlib.contextmanager
def no_reorder() -> Iterator[None]:
    """Keep the instructions of the block in program order: they carry a ("no_reorder") loop
    marker that the timing model's compiler order honours (values are computed in order
    anyway)."""
    ctx, st = context("ncc.no_reorder")
    st.flush()
    with scoped_marker(ctx, "no_reorder"):
        yield
        st.flush()


__all__ = [
    "allocation_scope",
    "enable_stack_allocator",
    "force_auto_alloc",
    "multi_buffer",
    "no_reorder",
    "psum",
    "sbuf",
    "skip_middle_end_transformations",
]
