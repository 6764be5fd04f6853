"""Loop-body tiles: reuse the space of the previous iteration's tile when SBUF/PSUM is full.

`for i in nl.affine_range(n): t = nl.ndarray(...)` keeps the previous iteration's `t` alive in
Python until the new one is assigned, so a body tile larger than half the usable SBUF could
never be allocated, although the compiler gives such a tile one buffer for the loop. When an
automatic allocation fails, trnsim frees the live tiles made at the same source line in an
earlier iteration of a loop that encloses this allocation, marks them reclaimed (any later
use of one is an AllocationError, as the compiler would have run out of space keeping it
alive) and retries. Knows allocation sites and loop nests; nothing about values.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from trnsim.errors import AllocationError
from trnsim.program import SourceLocation

Loops = tuple[tuple[int, str, int], ...]


def allocate_reusing(ctx: Any, loc: SourceLocation | None, allocate: Callable[[], Any]) -> Any:
    """allocate(), retried after reclaiming earlier iterations' tiles from the same line."""
    sites = ctx.extra.setdefault("tile_sites", {})
    key = None if loc is None else (loc.filename, loc.lineno)
    loops = tuple(ctx.loops)
    try:
        view = allocate()
    except AllocationError:
        site = sites.get(key) if key is not None else None
        stale = _earlier_iterations(site["entries"], loops) if site is not None else []
        if not stale:
            raise
        view = None
        for buf in stale:
            buf.reclaimed = (
                f"its space was reused by the same allocation at {loc.short()} in a later loop "
                "iteration because the memory was full"
            )
            buf.release()
            try:
                view = allocate()
                break
            except AllocationError:
                if buf is stale[-1]:
                    raise
    if key is not None:
        _remember(sites, key, view.buffer, loops)
    return view


def _earlier_iterations(entries: list[tuple[Any, Loops]], loops: Loops) -> list[Any]:
    """Live buffers of a site allocated in an earlier iteration of a loop enclosing `loops`,
    oldest first."""
    out = []
    for ref, old in entries:
        buf = ref()
        if buf is not None and not buf.reclaimed and _earlier(old, loops):
            out.append(buf)
    return out


def _earlier(old: Loops, cur: Loops) -> bool:
    for (lid_o, _, it_o), (lid_c, _, it_c) in zip(old, cur, strict=False):
        if lid_o != lid_c:
            return False
        if it_o != it_c:
            return it_o < it_c
    return False


def _remember(sites: dict, key: tuple[str, int], buf: Any, loops: Loops) -> None:
    site = sites.get(key)
    if site is None:
        site = sites[key] = {"entries": [], "limit": 16}
    entries = site["entries"]
    entries.append((weakref.ref(buf), loops))
    if len(entries) > site["limit"]:  # drop dead entries: amortised O(1) per allocation
        entries[:] = [(r, lp) for r, lp in entries if r() is not None and not r().reclaimed]
        site["limit"] = 2 * len(entries) + 16
