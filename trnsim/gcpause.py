"""Pausing Python's cyclic garbage collector around tracing and scheduling."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic GC inside the block (and restore it if it was on). Tracing and
    scheduling make no reference cycles, but a full collection walks every object of a large
    program record, so time per instruction would grow with the kernel."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
