"""nki.collectives variable-length forms: all_to_all_v and all_gather_v on flat element
buffers, counts and displacements in a uint32 metadata tensor (rows: send counts, send
displacements, receive counts, receive displacements), and their split prepare / trigger
forms (0.7.0: one prepare, then its trigger, before any other prepare; not on NeuronSwitch
systems)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trnsim.nki._isa_base import NkiInstruction, _issue
from trnsim.nki.ranks import World
from trnsim.nki.rendezvous import Call, Spec, arrive
from trnsim.nki.replica import (
    ReplicaGroup,
    call,
    fail,
    priority_ok,
    rank_list,
    read,
    spaces,
    start,
    tensors,
)
from trnsim.semantics import collective as sem


def _metadata(api: str, meta: Any, n: int, recv_counts_known: bool, has_rdispls: bool) -> None:
    from trnsim.spec import is_tensor

    if not is_tensor(meta):
        fail(api, f"metadata_tensor is {type(meta).__name__}", "a uint32 tensor (rows x ranks)")
    rows = 4 if has_rdispls else 3 if recv_counts_known else 2
    if meta.dtype.name != "uint32" or len(meta.shape) != 2 or meta.shape[0] < rows \
            or meta.shape[1] < n:
        fail(api, f"metadata_tensor is {list(meta.shape)} {meta.dtype.name}",
             f"a uint32 tensor of shape (2-4, ranks): at least {rows} rows (row 0 send counts, "
             "1 send displacements, 2 receive counts, 3 receive displacements) and one column "
             f"per rank ({n})")


def _prepare_args(api: str, srcs: Any, dsts: Any, replica_group: Any, metadata_tensor: Any,
                  recv_counts_known: bool, has_rdispls: bool, priority: Any) -> tuple:
    ctx, world, rank, program = start(api)
    srcs = tensors(api, "srcs", srcs, one=True)
    dsts = tensors(api, "dsts", dsts, one=True)
    spaces(api, srcs + dsts, hbm_only=True)
    rl = rank_list(api, replica_group, world, rank)
    _metadata(api, metadata_tensor, len(rl), recv_counts_known, has_rdispls)
    priority_ok(api, priority, ctx)
    return ctx, world, rank, program, srcs, dsts, rl


def _run(api: str, ctx: Any, world: World, rank: int, program: int, srcs: list, dsts: list,
         rl: tuple, meta: Any, has_rdispls: bool, recv_counts_known: bool,
         name: str | None, gather: bool) -> NkiInstruction:
    c = call(api, ctx, rank, program, srcs, dsts, name, has_rdispls=has_rdispls,
             recv_counts_known=recv_counts_known)
    c.extra["metadata"] = [meta]

    def metas(calls: list[Call]) -> list[Any]:
        return [read(cl.extra["metadata"][0]).astype("int64") for cl in calls]

    def compute(calls: list[Call], w: World) -> list[list[Any]]:
        srcs_v, m = [read(cl.srcs[0]) for cl in calls], metas(calls)
        if gather:
            return [[sem.all_gather_v(srcs_v, m, read(cl.dsts[0]), has_rdispls, pos)]
                    for pos, cl in enumerate(calls)]
        return [[sem.all_to_all_v(srcs_v, m, pos, read(cl.dsts[0]), has_rdispls)]
                for pos, cl in enumerate(calls)]

    def timing(calls: list[Call], lnc: int) -> tuple:
        isz = calls[0].srcs[0].dtype.itemsize
        n = len(calls)
        if calls[0].ctx.device.values:
            m = metas(calls)
            counts = [[int(m[s][0][0 if gather else d]) for d in range(n)] for s in range(n)]
        else:  # timing only: the metadata holds no values; assume even shares
            even = calls[0].srcs[0].size // (1 if gather else n)
            counts = [[even] * n for _ in range(n)]
        pairs = tuple((s, d, counts[s][d] * isz) for s in range(n) for d in range(n)
                      if s != d)
        return "permute", (sum(p[2] for p in pairs),), [pairs]

    return arrive(c, rl, Spec(api, compute, timing), world)


def all_to_all_v(srcs: Sequence[Any], dsts: Sequence[Any], replica_group: ReplicaGroup,
                 metadata_tensor: Any, recv_counts_known: bool = False,
                 has_rdispls: bool = False, priority: int | None = None,
                 name: str | None = None) -> NkiInstruction:
    """All-to-all of flat buffers with per-destination counts and displacements (elements)."""
    api = "all_to_all_v"
    ctx, world, rank, prog, srcs, dsts, rl = _prepare_args(
        api, srcs, dsts, replica_group, metadata_tensor, recv_counts_known, has_rdispls,
        priority)
    return _run(api, ctx, world, rank, prog, srcs, dsts, rl, metadata_tensor, has_rdispls,
                recv_counts_known, name, gather=False)


def all_gather_v(srcs: Sequence[Any], dsts: Sequence[Any], replica_group: ReplicaGroup,
                 metadata_tensor: Any, recv_counts_known: bool = False,
                 has_rdispls: bool = False, priority: int | None = None,
                 name: str | None = None) -> NkiInstruction:
    """All-gather of one flat chunk per rank (send count and displacement: column 0)."""
    api = "all_gather_v"
    ctx, world, rank, prog, srcs, dsts, rl = _prepare_args(
        api, srcs, dsts, replica_group, metadata_tensor, recv_counts_known, has_rdispls,
        priority)
    return _run(api, ctx, world, rank, prog, srcs, dsts, rl, metadata_tensor, has_rdispls,
                recv_counts_known, name, gather=True)


class _Prepared(NkiInstruction):
    """The handle a *_prepare returns: its record, and the arguments its trigger runs with."""

    __slots__ = ("args", "kind", "used")


def _prepare(api: str, gather: bool, args: tuple) -> NkiInstruction:
    srcs, dsts, replica_group, metadata_tensor, recv_counts_known, has_rdispls, priority, name \
        = args
    ctx, world, _, _, s, d, rl = _prepare_args(
        api, srcs, dsts, replica_group, metadata_tensor, recv_counts_known, has_rdispls,
        priority)
    switch = any(lv.fabric == "switch" for lv in world.topology.levels)
    if switch:
        fail(api, f"{world.topology.name} is a NeuronSwitch system",
             "NeuronSwitch-based instances (the Trn3 UltraServer) do not support the "
             "prepare/trigger split: call the plain form")
    slot = ctx.extra.get("cc_prepared")
    if slot is not None and not slot.used:
        fail(api, f"an earlier {slot.kind} has not been triggered yet",
             "each prepare must be followed by exactly one trigger before another prepare")
    rec = _issue(api, None, metadata=metadata_tensor, name=name)
    handle = _Prepared(rec._instr)
    handle.args, handle.kind, handle.used = (s, d, rl, metadata_tensor, has_rdispls,
                                             recv_counts_known, gather), api, False
    ctx.extra["cc_prepared"] = handle
    return handle


def _trigger(api: str, prepare_instr: Any, name: str | None) -> NkiInstruction:
    ctx, world, rank, prog = start(api)
    want = api.replace("_trigger", "_prepare")
    if not isinstance(prepare_instr, _Prepared) or prepare_instr.kind != want:
        fail(api, f"prepare_instr is {prepare_instr!r}", f"the NkiInstruction {want} returned")
    if prepare_instr.used:
        fail(api, "this prepare was triggered already", "exactly one trigger per prepare")
    prepare_instr.used = True
    s, d, rl, meta, has_rdispls, recv_known, gather = prepare_instr.args
    out = _run(api.replace("_trigger", ""), ctx, world, rank, prog, s, d, rl, meta,
               has_rdispls, recv_known, name, gather)
    out._instr.deps = tuple(sorted({*out._instr.deps, prepare_instr.index}))
    return out


def all_to_all_v_prepare(srcs: Sequence[Any], dsts: Sequence[Any], replica_group: ReplicaGroup,
                         metadata_tensor: Any, recv_counts_known: bool = False,
                         has_rdispls: bool = False, priority: int | None = None,
                         name: str | None = None) -> NkiInstruction:
    """Begin a split all_to_all_v: reads the metadata now; all_to_all_v_trigger runs it."""
    return _prepare("all_to_all_v_prepare", False, (srcs, dsts, replica_group, metadata_tensor,
                                                    recv_counts_known, has_rdispls, priority,
                                                    name))


def all_to_all_v_trigger(prepare_instr: NkiInstruction, name: str | None = None) -> NkiInstruction:
    """Run the all_to_all_v that `prepare_instr` set up."""
    return _trigger("all_to_all_v_trigger", prepare_instr, name)


def all_gather_v_prepare(srcs: Sequence[Any], dsts: Sequence[Any], replica_group: ReplicaGroup,
                         metadata_tensor: Any, recv_counts_known: bool = False,
                         has_rdispls: bool = False, priority: int | None = None,
                         name: str | None = None) -> NkiInstruction:
    """Begin a split all_gather_v: reads the metadata now; all_gather_v_trigger runs it."""
    return _prepare("all_gather_v_prepare", True, (srcs, dsts, replica_group, metadata_tensor,
                                                   recv_counts_known, has_rdispls, priority,
                                                   name))


def all_gather_v_trigger(prepare_instr: NkiInstruction, name: str | None = None) -> NkiInstruction:
    """Run the all_gather_v that `prepare_instr` set up."""
    return _trigger("all_gather_v_trigger", prepare_instr, name)
