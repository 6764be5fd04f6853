"""nki.collectives permutes: explicit source-target pairs, and the implicit ring permutes
(each rank to its rank-list successor, per channel) with their processing-rank helper."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trnsim.nki._isa_base import NkiInstruction, _issue
from trnsim.nki.ranks import World
from trnsim.nki.registers import VirtualRegister, new_register
from trnsim.nki.rendezvous import Call, Spec, arrive
from trnsim.nki.replica import (
    ReplicaGroup,
    bytes_of,
    call,
    fail,
    int_value,
    priority_ok,
    rank_list,
    read,
    reduce_op,
    spaces,
    start,
    tensors,
)
from trnsim.semantics import collective as sem

# channels a ring permute may use: 4 when the rank list holds every rank of the node (its
# chips), else 2 (collective_permute_implicit page, "Channels")
_MAX_CHANNELS_NODE, _MAX_CHANNELS = 4, 2


def collective_permute(srcs: Sequence[Any], dsts: Sequence[Any],
                       source_target_pairs: Sequence[tuple[int, int]],
                       priority: int | None = None, name: str | None = None) -> NkiInstruction:
    """Each (source, target) pair: the source rank's src into the target rank's dst."""
    api = "collective_permute"
    ctx, world, rank, program = start(api)
    srcs = tensors(api, "srcs", srcs, one=True)
    dsts = tensors(api, "dsts", dsts, one=True)
    spaces(api, srcs + dsts, hbm_only=True)
    pairs = _check_pairs(api, source_target_pairs, world)
    if tuple(srcs[0].shape) != tuple(dsts[0].shape):
        fail(api, f"src shape {list(srcs[0].shape)} and dst shape {list(dsts[0].shape)}",
             "src and dst of one shape")
    priority_ok(api, priority, ctx)
    involved = tuple(sorted({r for p in pairs for r in p}))
    if rank not in involved:
        fail(api, f"rank {rank} is in no (source, target) pair of {list(pairs)}",
             "only the ranks named in source_target_pairs call it")
    c = call(api, ctx, rank, program, srcs, dsts, name, pairs=pairs)

    def compute(calls: list[Call], w: World) -> list[list[Any]]:
        by_rank = {cl.rank: cl for cl in calls}
        out = []
        for cl in calls:
            src = next((s for s, t in pairs if t == cl.rank), None)
            out.append([read(by_rank[src].srcs[0]) if src is not None else None])
        return out

    def timing(calls: list[Call], lnc: int) -> tuple:
        nb = bytes_of(calls[0].srcs[0])
        pos = {r: i for i, r in enumerate(involved)}
        return "permute", (nb,), [tuple((pos[s], pos[t], nb) for s, t in pairs)]

    return arrive(c, involved, Spec(api, compute, timing), world)


def _check_pairs(api: str, pairs: Any, world: World) -> tuple[tuple[int, int], ...]:
    out = []
    for p in pairs or ():
        if not isinstance(p, (tuple, list)) or len(p) != 2:
            fail(api, f"source_target_pairs holds {p!r}", "(source, target) rank pairs")
        s, t = (int(x) for x in p)
        for r in (s, t):
            if not 0 <= r < world.ranks:
                fail(api, f"pair {tuple(p)} names rank {r}, the launch has {world.ranks} ranks",
                     f"ranks 0..{world.ranks - 1}")
        out.append((s, t))
    targets = [t for _, t in out]
    if len(set(targets)) != len(targets):
        fail(api, f"a rank is the target of two pairs in {out}", "one source per target")
    if not out:
        fail(api, "source_target_pairs is empty", "at least one (source, target) pair")
    return tuple(out)


def _channels(api: str, srcs_by: Any, dsts_by: Any, channel_ids: Any, world: World,
              rl: tuple[int, ...], extra: Any = None) -> tuple[list[Any], list[Any], list[Any]]:
    if not isinstance(srcs_by, (list, tuple)) or not isinstance(dsts_by, (list, tuple)):
        fail(api, "srcs_by_channel / dsts_by_channel must be lists of per-channel tensor lists",
             "[[t_channel0], [t_channel1], ...]")
    ids = list(channel_ids)
    if not (len(srcs_by) == len(dsts_by) == len(ids)) or (extra is not None
                                                          and len(extra) != len(ids)):
        fail(api, f"{len(srcs_by)} source and {len(dsts_by)} destination channels for "
             f"channel_ids {ids}", "one inner list per channel id")
    per_node = world.topology.ranks_per_chip(world.lnc) * world.topology.levels[0].units
    node = world.ranks >= per_node and len(rl) >= per_node
    cap = _MAX_CHANNELS_NODE if node or len(rl) == world.ranks else _MAX_CHANNELS
    if len(ids) > cap or len(set(ids)) != len(ids):
        fail(api, f"channel_ids {ids}", f"at most {cap} distinct channels for this rank list "
             "(4 for replica groups of every device in a node, 2 otherwise)")
    srcs = [tensors(api, f"srcs_by_channel[{i}]", s, one=True)[0] for i, s in enumerate(srcs_by)]
    dsts = [tensors(api, f"dsts_by_channel[{i}]", d, one=True)[0] for i, d in enumerate(dsts_by)]
    ext = ([tensors(api, f"srcs1_by_channel[{i}]", s, one=True)[0] for i, s in enumerate(extra)]
           if extra is not None else [])
    for s, d in zip(srcs, dsts, strict=True):
        if tuple(s.shape) != tuple(d.shape):
            fail(api, f"src shape {list(s.shape)} and dst shape {list(d.shape)}",
                 "each channel's src and dst of one shape")
    spaces(api, srcs + dsts + ext)
    return srcs, dsts, ext


def _ring_timing(calls: list[Call], lnc: int) -> tuple:
    n = len(calls)
    nbs = tuple(bytes_of(t) for t in calls[0].srcs)
    return "permute", nbs, [tuple((i, (i + 1) % n, nb) for i in range(n)) for nb in nbs]


def collective_permute_implicit(srcs_by_channel: Sequence[Sequence[Any]],
                                dsts_by_channel: Sequence[Sequence[Any]],
                                replica_group: ReplicaGroup, channel_ids: Sequence[int] = (0,),
                                priority: int | None = None,
                                name: str | None = None) -> NkiInstruction:
    """Send to the rank-list successor and receive the predecessor's, per channel."""
    api = "collective_permute_implicit"
    ctx, world, rank, program = start(api)
    rl = rank_list(api, replica_group, world, rank)
    srcs, dsts, _ = _channels(api, srcs_by_channel, dsts_by_channel, channel_ids, world, rl)
    priority_ok(api, priority, ctx)
    c = call(api, ctx, rank, program, srcs, dsts, name, channels=tuple(channel_ids))

    def compute(calls: list[Call], w: World) -> list[list[Any]]:
        n = len(calls)
        return [[read(calls[(pos - 1) % n].srcs[i]) for i in range(len(srcs))]
                for pos in range(n)]

    return arrive(c, rl, Spec(api, compute, _ring_timing), world)


def collective_permute_implicit_reduce(srcs0_by_channel: Sequence[Sequence[Any]],
                                       srcs1_by_channel: Sequence[Sequence[Any]],
                                       dsts_by_channel: Sequence[Sequence[Any]],
                                       replica_group: ReplicaGroup, op: Any,
                                       channel_ids: Sequence[int] = (0,),
                                       priority: int | None = None,
                                       name: str | None = None) -> NkiInstruction:
    """op(srcs0, srcs1) of each rank to its successor; the predecessor's result into dsts."""
    api = "collective_permute_implicit_reduce"
    ctx, world, rank, program = start(api)
    rl = rank_list(api, replica_group, world, rank)
    srcs, dsts, srcs1 = _channels(api, srcs0_by_channel, dsts_by_channel, channel_ids, world,
                                  rl, srcs1_by_channel)
    for a, b in zip(srcs, srcs1, strict=True):
        if tuple(a.shape) != tuple(b.shape):
            fail(api, f"srcs0 shape {list(a.shape)} and srcs1 shape {list(b.shape)}",
                 "both reduction operands of one shape")
    opname = reduce_op(api, op)
    priority_ok(api, priority, ctx)
    c = call(api, ctx, rank, program, srcs, dsts, name, op=opname, channels=tuple(channel_ids))
    c.extra["src1"] = srcs1

    def compute(calls: list[Call], w: World) -> list[list[Any]]:
        n = len(calls)
        return [[sem.reduce([read(calls[(pos - 1) % n].srcs[i]),
                             read(calls[(pos - 1) % n].extra["src1"][i])], opname)
                 for i in range(len(srcs))] for pos in range(n)]

    return arrive(c, rl, Spec(api, compute, _ring_timing), world)


def collective_permute_implicit_current_processing_rank_id(
        iteration_id: Any, replica_group: ReplicaGroup, channel_id: int = 0,
        name: str | None = None) -> VirtualRegister:
    """The rank whose data a ring permute's iteration `iteration_id` processes: the caller's
    own at iteration 0, then its predecessors' in turn, in a register."""
    api = "collective_permute_implicit_current_processing_rank_id"
    ctx, world, rank, _ = start(api)
    rl = rank_list(api, replica_group, world, rank)
    it = int_value(api, iteration_id, ctx)
    who = rl[(rl.index(rank) - it) % len(rl)]
    reg = new_register(VirtualRegister)
    _issue("register_move", None, dst=reg, src=who, name=name)
    return reg
