"""ReplicaGroup and the argument rules nki.collectives calls share (documented rules only,
each message citing it): tensor lists, memory spaces, coalescing, LNC=1 private HBM,
reduction ops, DMA priority, rank lists."""

from __future__ import annotations

import enum
import os
from typing import Any

import numpy as np

from trnsim.errors import ConstraintError
from trnsim.nki.context import current
from trnsim.nki.ranks import World, world_of
from trnsim.nki.registers import VirtualRegister
from trnsim.nki.rendezvous import Call
from trnsim.program import capture_location
from trnsim.semantics import collective as sem
from trnsim.semantics.control import register_value
from trnsim.spec import is_tensor


class rg_partition_op(enum.Enum):
    """How ReplicaGroup.from_partition_op maps a rank to its rank-list id."""

    bitwise_and = "bitwise_and"
    div = "div"
    mod = "mod"


class ReplicaGroup:
    """The set of ranks a collective runs on, as rank-lists: the collective runs within each
    rank-list, all rank-lists at once; a rank belongs to at most one rank-list.

    ReplicaGroup([[0, 1, 2, 3], [4, 5, 6, 7]]); ReplicaGroup([0, 1]) is one rank-list.
    """

    def __init__(self, *groups: Any):
        if len(groups) == 1 and isinstance(groups[0], (list, tuple)) and groups[0] and \
                all(isinstance(g, (list, tuple)) for g in groups[0]):
            groups = tuple(groups[0])
        elif len(groups) == 1 and isinstance(groups[0], (list, tuple)):
            groups = (groups[0],)
        lists = []
        seen: dict[int, int] = {}
        for i, g in enumerate(groups):
            if not isinstance(g, (list, tuple)) or not g:
                raise ConstraintError(f"ReplicaGroup: rank-list {i} is {g!r}; each rank-list is "
                                      "a non-empty list of ranks", capture_location())
            ranks = []
            for r in g:
                if isinstance(r, bool) or not isinstance(r, (int, np.integer)) or r < 0:
                    raise ConstraintError(f"ReplicaGroup: rank {r!r} in rank-list {i} is not a "
                                          "rank (a non-negative integer)", capture_location())
                if int(r) in seen:
                    raise ConstraintError(
                        f"ReplicaGroup: rank {int(r)} is in rank-lists {seen[int(r)]} and {i}; "
                        "each rank must participate in only one rank-list",
                        capture_location())
                seen[int(r)] = i
                ranks.append(int(r))
            lists.append(tuple(ranks))
        self.rank_lists: tuple[tuple[int, ...], ...] = tuple(lists)

    @property
    def groups(self) -> tuple[tuple[int, ...], ...]:
        return self.rank_lists

    @staticmethod
    def from_partition_op(world_size: int, op: rg_partition_op, operand: int) -> ReplicaGroup:
        """Ranks [0, world_size) sharing rank_list_id = op(rank, operand) form one rank-list."""
        fn = {rg_partition_op.bitwise_and: lambda r: r & operand,
              rg_partition_op.div: lambda r: r // operand,
              rg_partition_op.mod: lambda r: r % operand}.get(op)
        if fn is None:
            raise ConstraintError(f"ReplicaGroup.from_partition_op: {op!r} is not an "
                                  f"rg_partition_op ({', '.join(m.name for m in rg_partition_op)})",
                                  capture_location())
        lists: dict[int, list[int]] = {}
        for r in range(int(world_size)):
            lists.setdefault(fn(r), []).append(r)
        return ReplicaGroup([lists[k] for k in sorted(lists)])

    def rank_list_of(self, rank: int) -> tuple[int, ...] | None:
        for g in self.rank_lists:
            if rank in g:
                return g
        return None

    def __repr__(self) -> str:
        return f"ReplicaGroup({[list(g) for g in self.rank_lists]})"


# ---------------------------------------------------------------- argument rules


def fail(api: str, what: str, allowed: str) -> None:
    raise ConstraintError(f"nki.collectives.{api}: {what}; {allowed}", capture_location())


def tensors(api: str, name: str, xs: Any, one: bool = False) -> list[Any]:
    if not isinstance(xs, (list, tuple)) or not xs:
        fail(api, f"{name} must be a list of tensors, got {type(xs).__name__}",
              f"pass [tensor]{'' if one else ' or [t0, t1, ...]'}")
    for x in xs:
        if not is_tensor(x):
            fail(api, f"{name} holds {type(x).__name__}, not a tensor", "pass NKI tensors")
    if one and len(xs) != 1:
        fail(api, f"{name} holds {len(xs)} tensors",
              "coalesced collective communication is not supported here: exactly one tensor")
    return list(xs)


def spaces(api: str, ts: list[Any], hbm_only: bool = False) -> str:
    found = {"hbm" if t.buffer.space == "hbm" else t.buffer.space for t in ts}
    if "psum" in found:
        fail(api, "a tensor is in PSUM", "collective tensors live in HBM or SBUF")
    if len(found) > 1:
        fail(api, "the tensors mix HBM and SBUF",
              "mixing memory spaces is not supported: all on HBM or all on SBUF")
    space = found.pop()
    if hbm_only and space != "hbm":
        fail(api, f"the tensors are in {space}", "tensors must reside on HBM")
    return space


def pairs(api: str, srcs: list[Any], dsts: list[Any], space: str) -> None:
    if len(srcs) != len(dsts):
        fail(api, f"{len(srcs)} srcs and {len(dsts)} dsts", "one dst per src")
    if len(srcs) > 1 and space != "hbm":
        fail(api, f"{len(srcs)} SBUF tensors", "coalesced collective communication (several "
              "tensors) is only supported when the tensors are on HBM")
    if space == "sbuf":
        for t in (*srcs, *dsts):
            if len(t.shape) != 2:
                fail(api, f"SBUF tensor '{t.name}' has shape {list(t.shape)}",
                      "SBUF collectives operate on 2-D tensors with a single free dimension")


def lnc1_hbm(api: str, world: World, srcs: list[Any], dsts: list[Any]) -> None:
    """At LNC=1 the sources must be private HBM, the destinations too unless
    NKI_LNC1_SHARED_HBM=1 (0.7.0 all_reduce / all_gather pages)."""
    if world.lnc != 1:
        return
    for t in srcs:
        if t.buffer.space == "hbm" and t.buffer.kind == "shared_hbm":
            fail(api, f"src '{t.name}' is in shared HBM at LNC=1",
                  "when the LNC degree is 1 the srcs must be on private HBM (nl.hbm / "
                  "nl.private_hbm): copy the input there first")
    if os.environ.get("NKI_LNC1_SHARED_HBM", "").strip() == "1":
        return
    for t in dsts:
        if t.buffer.space == "hbm" and t.buffer.kind == "shared_hbm":
            fail(api, f"dst '{t.name}' is in shared HBM at LNC=1",
                  "at LNC=1 the dsts may be shared only when NKI_LNC1_SHARED_HBM=1 is set; "
                  "else use nl.hbm (private) destinations")


def reduce_op(api: str, op: Any) -> str:
    name = getattr(op, "__name__", None) or getattr(op, "name", None) or str(op)
    name = {"maximum": "maximum", "max": "maximum", "minimum": "minimum", "min": "minimum",
            "add": "add"}.get(str(name).split(".")[-1], str(name))
    if name not in sem.REDUCE_OPS:
        fail(api, f"op={op!r}", "the reduction is nl.add, nl.minimum or nl.maximum")
    return name


def priority_ok(api: str, priority: Any, ctx: Any) -> None:
    if priority is None:
        return
    if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= 3:
        fail(api, f"priority={priority!r}", "a DMA quality-of-service level 0-3")
    if ctx.chip.nc_version < 4:
        fail(api, f"priority={priority} on {ctx.chip.name} (NeuronCore-v{ctx.chip.nc_version})",
              "priority is NeuronCore-v4+ only (trn3); leave it None")


def rank_list(api: str, group: Any, world: World, rank: int) -> tuple[int, ...]:
    if not isinstance(group, ReplicaGroup):
        fail(api, f"replica_group is {type(group).__name__}",
              "pass an nki.collectives.ReplicaGroup")
    for g in group.rank_lists:
        bad = [r for r in g if r >= world.ranks]
        if bad:
            fail(api, f"{group} names rank {bad[0]}, but the launch has {world.ranks} ranks",
                  f"ranks 0..{world.ranks - 1}")
    rl = group.rank_list_of(rank)
    if rl is None:
        fail(api, f"rank {rank} is in no rank-list of {group}",
              "every rank that calls a collective must be in its replica group")
    return rl


def start(api: str) -> tuple[Any, World, int, int]:
    ctx = current(f"nki.collectives.{api}")
    world = world_of(ctx, api)
    rank, program = world.rank_of(ctx)
    return ctx, world, rank, program


def call(api: str, ctx: Any, rank: int, program: int, srcs: list, dsts: list,
          name: str | None, **attrs: Any) -> Call:
    return Call(api, rank, program, ctx, capture_location(), srcs, dsts, {}, attrs, name or "")


def read(t: Any) -> np.ndarray:
    return t.read()


def bytes_of(t: Any) -> int:
    return int(t.size) * t.dtype.itemsize


def int_value(api: str, x: Any, ctx: Any) -> int:
    if isinstance(x, VirtualRegister):
        return register_value(ctx.core, x)
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
        fail(api, f"iteration_id={x!r}", "an integer or a register")
    return int(x)
