"""Where the ranks of a collective meet: arrivals are matched (the k-th collective of each
program on one rank list), checked against each other, the values computed for every rank
(trnsim.semantics.collective), each program's instruction record issued, and the collective
filed for the timing model (trnsim.timing.world). Knows nothing about time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trnsim.errors import ConstraintError
from trnsim.nki._isa_base import NkiInstruction
from trnsim.nki.context import KernelContext
from trnsim.nki.ranks import World
from trnsim.program import SourceLocation
from trnsim.timing.world import CollectiveRecord


@dataclass
class Call:
    """One program's call of a collective, as it arrived."""

    op: str  # the NKI function, e.g. "all_reduce"
    rank: int
    program: int
    ctx: KernelContext
    loc: SourceLocation | None
    srcs: list[Any]  # tensors (per coalesced pair, or per channel)
    dsts: list[Any]
    extra: dict[str, list[Any]] = field(default_factory=dict)  # e.g. src1 / metadata tensors
    attrs: dict[str, Any] = field(default_factory=dict)  # what all ranks must agree on
    name: str = ""


@dataclass
class Spec:
    """How a collective completes: its record opcode, its values, its timing record."""

    opcode: str
    compute: Callable[[list[Call], World], list[list[np.ndarray | None]]]  # per call, per dst
    timing: Callable[[list[Call], int], tuple[str, int, tuple | None]]  # (op, nbytes, pairs)


def arrive(call: Call, rank_list: tuple[int, ...], spec: Spec, world: World) -> NkiInstruction:
    """File `call`; the last program of the rank list to arrive completes the collective.

    Blocks the calling program (others run) until every rank of `rank_list` has made its
    matching call; returns the caller's own instruction record."""
    key = ("cc", rank_list)
    counts = call.ctx.extra.setdefault("cc_counts", {})
    k = counts.get(key, 0)
    counts[key] = k + 1
    entry = world.state.setdefault((key, k), {"calls": {}, "done": False, "records": {}})
    entry["calls"][(call.rank, call.program)] = call
    what = (f"nki.collectives.{call.op} (collective #{k} of rank list "
            f"{list(rank_list)})")
    if len(entry["calls"]) == len(rank_list) * world.lnc:
        _complete(entry, rank_list, spec, world, k)
    else:
        p = call.rank * world.lnc + call.program
        world.programs.wait_until(p, lambda: entry["done"], what, call.loc)
    return entry["records"][(call.rank, call.program)]


def _complete(entry: dict, rank_list: tuple[int, ...], spec: Spec, world: World,
              k: int) -> None:
    calls = [entry["calls"][(r, p)] for r in rank_list for p in range(world.lnc)]
    _check_consistent(calls, rank_list, k)
    # One collective of the ranks (both cores name the same tensors), or one per core.
    groups = ([[c for c in calls if c.program == p] for p in range(world.lnc)]
              if _per_core(calls) else [[c for c in calls if c.program == 0]])
    if world.devices[0].values:
        for group in groups:
            results = spec.compute(group, world)
            for c in (group if len(groups) > 1 else calls):
                res = results[rank_list.index(c.rank)]
                for dst, value in zip(c.dsts, res, strict=True):
                    if value is not None:
                        dst.write(value)
    members: dict[tuple[int, int], list[int]] = {}
    for c in calls:
        recs = _issue(c, spec.opcode)
        entry["records"][(c.rank, c.program)] = NkiInstruction(recs[-1])
        members[(c.rank, c.program)] = [r.index for r in recs]
    for group in groups:
        op, nbytes, pairs = spec.timing(group, world.lnc)
        for i in range(len(group[0].srcs) or 1):
            per_rank = {c.rank: members[(c.rank, c.program)][i] for c in group}
            part_pairs = pairs[i] if pairs is not None else None
            part_bytes = nbytes[i] if isinstance(nbytes, tuple) else nbytes
            world.calls.append(CollectiveRecord(op, rank_list, part_bytes, per_rank,
                                                len(world.log), part_pairs, calls[0].op))
    entry["done"] = True
    # The calls hold their programs' contexts, which hold the world: let a finished launch
    # go when its last reference does (its HBMs and their host RAM with it).
    entry["calls"].clear()


def _per_core(calls: list[Call]) -> bool:
    """At LNC=2, do the cores of a rank pass their own tensors (SBUF tiles: each core has its
    own SBUF)? Then each core's call is a collective of its own among the same-numbered cores
    of the ranks, as nki-library's allgather_sb2sb_tiled (sb2sb_allgather.py:147-162, run at
    LNC=2 by its tests) gathers each core's tiles; cores naming the same shared-HBM tensors
    issue one collective together."""
    first: dict[int, Call] = {}
    for c in calls:
        f = first.setdefault(c.rank, c)
        if f is not c and any(a.buffer is not b.buffer or a.layout != b.layout
                              for a, b in zip(f.srcs + f.dsts, c.srcs + c.dsts, strict=True)):
            return True
    return False


def _issue(c: Call, opcode: str) -> list[Any]:
    """The call's instruction records on its own core, one per coalesced tensor pair."""
    core = c.ctx.core
    out = []
    n = max(len(c.srcs), len(c.dsts), 1)
    for i in range(n):
        ops: dict[str, Any] = {}
        if i < len(c.srcs):
            ops["src"] = c.srcs[i]
        if i < len(c.dsts):
            ops["dst"] = c.dsts[i]
        for name, ts in c.extra.items():
            if i < len(ts):
                ops[name] = ts[i]
        try:
            out.append(core.issue(opcode, "dma", ops, dict(c.attrs), loc=c.loc, name=c.name,
                                  loops=tuple(c.ctx.loops)))
        except ConstraintError as e:
            raise e.with_loc(c.loc) from None
    return out


def _shape_text(t: Any) -> str:
    return f"{list(t.shape)} {t.dtype.name}" if t is not None else "none"


def _check_consistent(calls: list[Call], rank_list: tuple[int, ...], k: int) -> None:
    """Every rank's call at this point is the same collective, with matching tensors."""
    first = calls[0]

    def where(c: Call) -> str:
        return f" ({c.loc.short()})" if c.loc is not None else ""

    for c in calls[1:]:
        if c.op != first.op:
            raise ConstraintError(
                f"nki.collectives: rank {first.rank} calls {first.op}{where(first)} as "
                f"collective #{k} of rank list {list(rank_list)}, but rank {c.rank} calls "
                f"{c.op}{where(c)} there; every rank of a rank list must issue the same "
                "collectives in the same order", c.loc)
        for key, v in first.attrs.items():
            if c.attrs.get(key) != v:
                raise ConstraintError(
                    f"nki.collectives.{c.op}: rank {c.rank} passes {key}={c.attrs.get(key)!r}"
                    f"{where(c)}, rank {first.rank} {key}={v!r}{where(first)}; the ranks of a "
                    "rank list must agree", c.loc)
        for what, a_list, b_list in (("srcs", first.srcs, c.srcs), ("dsts", first.dsts, c.dsts),
                                     *((n, first.extra[n], c.extra.get(n, [])) for n in
                                       first.extra)):
            if len(a_list) != len(b_list):
                raise ConstraintError(
                    f"nki.collectives.{c.op}: rank {c.rank} passes {len(b_list)} {what}, rank "
                    f"{first.rank} {len(a_list)}; the ranks must pass the same tensors' shapes",
                    c.loc)
            for i, (a, b) in enumerate(zip(a_list, b_list, strict=True)):
                if tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype:
                    raise ConstraintError(
                        f"nki.collectives.{c.op} (collective #{k} of rank list "
                        f"{list(rank_list)}): rank {c.rank}'s {what}[{i}] is {_shape_text(b)}"
                        f"{where(c)}, rank {first.rank}'s is {_shape_text(a)}{where(first)}; "
                        "every rank must pass the same shapes and dtypes", c.loc)
