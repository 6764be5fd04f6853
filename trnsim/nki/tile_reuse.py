"""Loop-body tiles: reuse the space of the previous iteration's tile when SBUF/PSUM is full.

`for i in nl.affine_range(n): t = nl.ndarray(...)` keeps the previous iteration's `t` alive in
Python until the new one is assigned, so a body tile larger than half the usable SBUF could
never be allocated, although the compiler gives such a tile one buffer for the loop. When an
automatic allocation fails, trnsim frees the tiles made at the same source line in an earlier
iteration of a loop that encloses this allocation and that the kernel can no longer reach:
held only by the variable this allocation rebinds (`t` above). A tile the kernel still
reaches (kept in a list, bound to another name, in an enclosing frame) is live, as it is for
the compiler, and keeps its space: the allocation then fails with the live tiles named.
Knows allocation sites, loop nests and the user's frames; nothing about values.
"""

from __future__ import annotations

import gc
import re
import sys
import types
import weakref
from collections.abc import Callable
from typing import Any

from trnsim.errors import AllocationError
from trnsim.memory import View
from trnsim.nki import liveness
from trnsim.program import SourceLocation, is_internal_file

Loops = tuple[tuple[int, str, int], ...]


def allocate_reusing(ctx: Any, loc: SourceLocation | None, allocate: Callable[[], Any],
                     space: str = "sbuf") -> Any:
    """allocate(), retried after reclaiming earlier iterations' tiles from the same line, then
    after freeing tiles past their last use (trnsim.nki.liveness)."""
    sites = ctx.extra.setdefault("tile_sites", {})
    key = None if loc is None else (loc.filename, loc.lineno)
    loops = tuple(ctx.loops)
    try:
        view = allocate()
    except AllocationError:
        try:
            view = _reclaim_earlier(sites.get(key) if key is not None else None, loops, loc,
                                    allocate)
        except AllocationError:
            view = liveness.free_idle(ctx, space, loc, allocate)
    if key is not None:
        _remember(sites, key, view.buffer, loops)
    liveness.tag(ctx, view.buffer, loc)
    return view


def _reclaim_earlier(site: dict | None, loops: Loops, loc: SourceLocation | None,
                     allocate: Callable[[], Any]) -> Any:
    """allocate() after freeing the site's tiles of earlier loop iterations that the kernel
    can no longer reach; re-raises the allocation's error if there are none."""
    stale = _earlier_iterations(site["entries"], loops) if site is not None else []
    stale = [b for b in stale if not _reachable(b, loc)]
    if not stale:
        return allocate()
    for buf in stale:
        buf.reclaimed = (
            f"its space was reused by the same allocation at {loc.short()} in a later loop "
            "iteration because the memory was full"
        )
        buf.release()
        try:
            return allocate()
        except AllocationError:
            if buf is stale[-1]:
                raise
    return allocate()  # pragma: no cover (the loop returns or raises)


_TARGET = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?::[^=]*)?=(?!=)")


def _reachable(buf: Any, loc: SourceLocation | None) -> bool:
    """Whether the kernel can still reach `buf` other than through the variable that the
    allocation at `loc` is about to rebind (`t = nl.ndarray(...)`)."""
    wrappers = [r for r in gc.get_referrers(buf) if isinstance(r, View)]
    ours = {id(wrappers)}
    for w in wrappers:
        for r in gc.get_referrers(w):
            if id(r) in ours or isinstance(r, types.FrameType):
                continue
            return True  # held by a list, a dict, an object: live
    m = _TARGET.match(loc.code) if loc is not None and loc.code else None
    target = m.group(1) if m else None
    frame = sys._getframe(1)
    first = True
    while frame is not None:
        if is_internal_file(frame.f_code.co_filename):
            frame = frame.f_back
            continue
        for name, value in frame.f_locals.items():
            if any(value is w for w in wrappers) and not (first and name == target):
                return True  # bound to another name, or in an enclosing frame
        first = False
        frame = frame.f_back
    return False


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
