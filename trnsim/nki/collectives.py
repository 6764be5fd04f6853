"""nki.collectives: collectives across the ranks of a multi-rank launch (trnsim.nki.ranks).

NKI's signatures (0.7.0, nki-api.md §9). Each call checks the documented rules, then meets the
other ranks of its rank list (trnsim.nki.rendezvous): the values are exact and equal on every
rank, and the timing model expands the collective into DMA transfers on the topology.
Coalesced lists (several tensors) are HBM-only, as documented; SBUF collectives take 2-D tiles.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trnsim.nki._isa_base import NkiInstruction, _issue
from trnsim.nki.collectives_v import (
    all_gather_v,
    all_gather_v_prepare,
    all_gather_v_trigger,
    all_to_all_v,
    all_to_all_v_prepare,
    all_to_all_v_trigger,
)
from trnsim.nki.permutes import (
    collective_permute,
    collective_permute_implicit,
    collective_permute_implicit_current_processing_rank_id,
    collective_permute_implicit_reduce,
)
from trnsim.nki.ranks import World
from trnsim.nki.registers import VirtualRegister, new_register
from trnsim.nki.rendezvous import Call, Spec, arrive
from trnsim.nki.replica import (
    ReplicaGroup,
    bytes_of,
    call,
    fail,
    lnc1_hbm,
    pairs,
    priority_ok,
    rank_list,
    read,
    reduce_op,
    rg_partition_op,
    spaces,
    start,
    tensors,
)
from trnsim.semantics import collective as sem

__all__ = [
    "ReplicaGroup",
    "all_gather",
    "all_gather_v",
    "all_gather_v_prepare",
    "all_gather_v_trigger",
    "all_reduce",
    "all_to_all",
    "all_to_all_v",
    "all_to_all_v_prepare",
    "all_to_all_v_trigger",
    "collective_permute",
    "collective_permute_implicit",
    "collective_permute_implicit_current_processing_rank_id",
    "collective_permute_implicit_reduce",
    "rank_id",
    "rg_partition_op",
    "self_index_in_replica_group",
]


# ---------------------------------------------------------------- completions


def _reduce_values(op: str):
    def compute(calls: list[Call], world: World) -> list[list[Any]]:
        outs = [sem.all_reduce([read(c.srcs[i]) for c in calls], op)
                for i in range(len(calls[0].srcs))]
        return [outs for _ in calls]

    return compute


def _whole(calls: list[Call], lnc: int) -> tuple[str, tuple[int, ...], None]:
    return "all_reduce", tuple(bytes_of(t) for t in calls[0].srcs), None


def all_reduce(srcs: Sequence[Any], dsts: Sequence[Any], replica_group: ReplicaGroup, op: Any,
               priority: int | None = None, name: str | None = None) -> NkiInstruction:
    """Reduce every rank's srcs (op: nl.add, nl.minimum, nl.maximum) into every rank's dsts."""
    ctx, world, rank, program = start("all_reduce")
    srcs, dsts = tensors("all_reduce", "srcs", srcs), tensors("all_reduce", "dsts", dsts)
    space = spaces("all_reduce", srcs + dsts)
    pairs("all_reduce", srcs, dsts, space)
    for s, d in zip(srcs, dsts, strict=True):
        if tuple(s.shape) != tuple(d.shape):
            fail("all_reduce", f"src shape {list(s.shape)} and dst shape {list(d.shape)}",
                  "each dst has its src's shape")
    opname = reduce_op("all_reduce", op)
    priority_ok("all_reduce", priority, ctx)
    lnc1_hbm("all_reduce", world, srcs, dsts)
    rl = rank_list("all_reduce", replica_group, world, rank)
    c = call("all_reduce", ctx, rank, program, srcs, dsts, name, op=opname)
    return arrive(c, rl, Spec("all_reduce", _reduce_values(opname), _whole), world)


def all_gather(srcs: Sequence[Any], dsts: Sequence[Any], replica_group: ReplicaGroup,
               collective_dim: int, priority: int | None = None,
               name: str | None = None) -> NkiInstruction:
    """Concatenate every rank's srcs (in rank-list order) along collective_dim into dsts."""
    api = "all_gather"
    ctx, world, rank, program = start(api)
    srcs, dsts = tensors(api, "srcs", srcs), tensors(api, "dsts", dsts)
    space = spaces(api, srcs + dsts)
    pairs(api, srcs, dsts, space)
    allowed = (0,) if space == "hbm" else (0, 1)
    if collective_dim not in allowed:
        fail(api, f"collective_dim={collective_dim!r} for {space.upper()} tensors",
              "only 0 for HBM tensors; 0 or 1 for SBUF tensors")
    rl = rank_list(api, replica_group, world, rank)
    n = len(rl)
    for s, d in zip(srcs, dsts, strict=True):
        want = list(s.shape)
        want[collective_dim] *= n
        if list(d.shape) != want:
            fail(api, f"dst shape {list(d.shape)} for src shape {list(s.shape)} over {n} ranks",
                  f"dst is {want} (src's dim {collective_dim} x {n})")
    priority_ok(api, priority, ctx)
    lnc1_hbm(api, world, srcs, dsts)
    c = call(api, ctx, rank, program, srcs, dsts, name, collective_dim=collective_dim)

    def compute(calls: list[Call], w: World) -> list[list[Any]]:
        outs = [sem.all_gather([read(c.srcs[i]) for c in calls], collective_dim)
                for i in range(len(srcs))]
        return [outs for _ in calls]

    def timing(calls: list[Call], lnc: int) -> tuple:
        return "all_gather", tuple(bytes_of(t) for t in calls[0].srcs), None

    return arrive(c, rl, Spec(api, compute, timing), world)


def reduce_scatter(srcs: Sequence[Any], dsts: Sequence[Any], replica_group: ReplicaGroup,
                   collective_dim: int, op: Any, priority: int | None = None,
                   name: str | None = None) -> NkiInstruction:
    """Reduce every rank's srcs; rank-list position i gets the i-th chunk along dim 0."""
    api = "reduce_scatter"
    ctx, world, rank, program = start(api)
    srcs, dsts = tensors(api, "srcs", srcs), tensors(api, "dsts", dsts)
    space = spaces(api, srcs + dsts)
    pairs(api, srcs, dsts, space)
    if collective_dim != 0:
        fail(api, f"collective_dim={collective_dim!r}", "currently only 0 is supported")
    rl = rank_list(api, replica_group, world, rank)
    n = len(rl)
    for s, d in zip(srcs, dsts, strict=True):
        want = [s.shape[0] // n, *s.shape[1:]]
        if s.shape[0] % n or list(d.shape) != want:
            fail(api, f"src shape {list(s.shape)} and dst shape {list(d.shape)} over {n} ranks",
                  f"src dim 0 is {n} x dst dim 0 (dst {want})")
    opname = reduce_op(api, op)
    priority_ok(api, priority, ctx)
    lnc1_hbm(api, world, srcs, dsts)
    c = call(api, ctx, rank, program, srcs, dsts, name, op=opname)

    def compute(calls: list[Call], w: World) -> list[list[Any]]:
        return [[sem.reduce_scatter([read(c.srcs[i]) for c in calls], opname, pos)
                 for i in range(len(srcs))] for pos in range(len(calls))]

    def timing(calls: list[Call], lnc: int) -> tuple:
        return "reduce_scatter", tuple(bytes_of(t) for t in calls[0].dsts), None

    return arrive(c, rl, Spec(api, compute, timing), world)


def all_to_all(srcs: Sequence[Any], dsts: Sequence[Any], replica_group: ReplicaGroup,
               collective_dim: int, priority: int | None = None,
               name: str | None = None) -> NkiInstruction:
    """Chunk i (along dim 0) of every rank's src to rank-list position i, in rank order."""
    api = "all_to_all"
    ctx, world, rank, program = start(api)
    srcs, dsts = tensors(api, "srcs", srcs), tensors(api, "dsts", dsts)
    spaces(api, srcs + dsts, hbm_only=True)
    pairs(api, srcs, dsts, "hbm")
    if collective_dim != 0:
        fail(api, f"collective_dim={collective_dim!r}", "currently only 0 is supported")
    rl = rank_list(api, replica_group, world, rank)
    n = len(rl)
    for s, d in zip(srcs, dsts, strict=True):
        if tuple(s.shape) != tuple(d.shape) or s.shape[0] % n:
            fail(api, f"src shape {list(s.shape)}, dst shape {list(d.shape)} over {n} ranks",
                  f"src and dst of one shape whose dim 0 divides by {n}")
    priority_ok(api, priority, ctx)
    lnc1_hbm(api, world, srcs, dsts)
    c = call(api, ctx, rank, program, srcs, dsts, name, collective_dim=0)

    def compute(calls: list[Call], w: World) -> list[list[Any]]:
        return [[sem.all_to_all([read(c.srcs[i]) for c in calls], pos)
                 for i in range(len(srcs))] for pos in range(len(calls))]

    def timing(calls: list[Call], lnc: int) -> tuple:
        return "all_to_all", tuple(bytes_of(t) for t in calls[0].srcs), None

    return arrive(c, rl, Spec(api, compute, timing), world)


def rank_id(name: str | None = None) -> VirtualRegister:
    """This rank's id, in a register (NKI: a VirtualRegister today, an NkiScalar later)."""
    _, _, rank, _ = start("rank_id")
    reg = new_register(VirtualRegister)
    _issue("register_move", None, dst=reg, src=rank, name=name)
    return reg


def self_index_in_replica_group(replica_group: ReplicaGroup, name: str | None = None) -> Any:
    """The caller's index within its own rank list of replica_group, in a register."""
    _, world, rank, _ = start("self_index_in_replica_group")
    rl = rank_list("self_index_in_replica_group", replica_group, world, rank)
    reg = new_register(VirtualRegister)
    _issue("register_move", None, dst=reg, src=rl.index(rank), name=name)
    return reg
