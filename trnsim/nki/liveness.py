"""Freeing a tile after its last use when SBUF/PSUM is full (the compiler's liveness).

The compiler allocates a tile from its first to its last use; Python keeps a tile object as
long as a variable names it. `tmp = nl.ndarray(..., buffer=nl.psum)`, used once and then never
again, holds its bytes in trnsim until the function returns, while the compiler reuses them
right after the last use (nki-library's MoE kernels allocate all eight PSUM banks after such a
tile). trnsim does not know the future uses of a tile, so when an automatic allocation finds
its memory full (and trnsim.nki.tile_reuse found nothing to reuse), it frees live tiles of the
same memory and core that were used since they were made, least recently used first, then tiles
not used yet (made, never touched: the compiler gives them no space before their first use;
nki-library's qkv_cte.py makes eight PSUM transpose tiles and may use one), until the
allocation fits. A freed tile is unusable: if the kernel touches it again, its last use was
not its last, and the launch runs again from its inputs with that tile kept (`LivenessMiss`,
caught by `run_with_plan`, which one-rank and multi-rank launches from host arrays use). After
`MAX_ATTEMPTS` runs, or when a run would not start from the same inputs, nothing is freed and
the AllocationError names the live tiles, as before. Deterministic: a tile is known across runs
by its rank, its program and its allocation's sequence number there (with its source line,
checked). Knows allocations and the program record;
nothing about values.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from trnsim.errors import AllocationError, LivenessMiss
from trnsim.program import SourceLocation

MAX_ATTEMPTS = 12  # runs of one launch; then the plain AllocationError
T = TypeVar("T")


@dataclass
class Plan:
    """What one launch's runs have learnt: the tiles that must be kept (by key)."""

    kept: set = field(default_factory=set)
    sites: dict = field(default_factory=dict)  # key -> allocation site, to check determinism
    freed: int = 0  # tiles freed in the current run

    def next_run(self, miss: LivenessMiss) -> bool:
        """Keep the tile `miss` names; False if it was kept already (no progress)."""
        if miss.key in self.kept:
            return False
        self.kept.add(miss.key)
        self.freed = 0
        return True


def run_with_plan(attempt: Callable[[Plan | None], T]) -> T:
    """attempt(plan) until no freed tile is touched again (at most MAX_ATTEMPTS runs, each
    keeping one more tile); then attempt(None), which frees nothing."""
    plan: Plan | None = Plan()
    for _ in range(MAX_ATTEMPTS):
        try:
            return attempt(plan)
        except LivenessMiss as miss:
            if not plan.next_run(miss):
                break
    return attempt(None)


def tag(ctx: Any, buf: Any, loc: SourceLocation | None) -> None:
    """Give a fresh tile its key (program, allocation number) and its birth in the program."""
    seq = ctx.extra.get("alloc_seq", 0)
    ctx.extra["alloc_seq"] = seq + 1
    buf.live_key = (ctx.extra.get("rank", 0), ctx.program_id, seq)
    buf.born = len(ctx.device.program)
    plan = ctx.extra.get("liveness")
    if plan is not None and loc is not None:
        site = (loc.filename, loc.lineno)
        known = plan.sites.setdefault(buf.live_key, site)
        if known != site:  # the kernel did not run the same way: stop freeing tiles
            ctx.extra["liveness"] = None


def free_idle(ctx: Any, space: str, loc: SourceLocation | None, allocate: Any) -> Any:
    """allocate(), after freeing least recently used tiles of `space`; re-raises the
    allocation's error if there is no plan or nothing to free."""
    plan = ctx.extra.get("liveness")
    core = ctx.core
    candidates = [b for b in _live(core, space)
                  if getattr(b, "live_key", None) is not None and b.live_key not in plan.kept
                  and not b.reclaimed] if plan is not None else []
    order = _least_recently_used(ctx.device.program, core.index, space, candidates)
    if not order:
        return allocate()
    where = f" at {loc.short()}" if loc is not None else ""
    for buf in order:
        buf.reclaimed = (f"trnsim freed it after its last use so far to make room for an "
                         f"allocation{where}, and the launch runs again keeping it")
        buf.liveness_freed = True
        buf.release()
        plan.freed += 1
        try:
            return allocate()
        except AllocationError:
            if buf is order[-1]:
                raise
    return allocate()  # pragma: no cover (the loop returns or raises)


def _live(core: Any, space: str) -> list[Any]:
    return core.live_buffers(space)


def _least_recently_used(program: list, core: int, space: str, bufs: list) -> list:
    """The tiles among `bufs` used since they were made, least recently used first (the
    last instruction whose operand regions overlap a tile's bytes), then those never used."""
    if not bufs:
        return []
    last: dict[int, int] = {}
    lo = min(b.born for b in bufs)
    boxes = [(b, b.partition_start, b.partition_start + b.partitions, b.byte_start,
              b.byte_start + b.nbytes) for b in bufs]
    for i in range(len(program) - 1, lo - 1, -1):
        ins = program[i]
        if ins.core != core:
            continue
        for op in ins.operands:
            r = op.region
            if r.space != space:
                continue
            for b, p0, p1, b0, b1 in boxes:
                if (id(b) not in last and i >= b.born and r.partition_start < p1
                        and p0 < r.partition_start + r.partitions and r.byte_start < b1
                        and b0 < r.byte_end):
                    last[id(b)] = i
        if len(last) == len(boxes):
            break
    used = [b for b in bufs if id(b) in last]
    unused = [b for b in bufs if id(b) not in last]  # made, not touched yet: no live range
    return sorted(used, key=lambda b: last[id(b)]) + unused
