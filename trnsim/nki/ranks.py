"""Multi-rank launches: one kernel on every rank of a topology, for nki.collectives.

    run = run_ranks(kernel, [(x0,), (x1,), (x2,), (x3,)], chip="trn2", lnc=1)
    run.outputs[2]                      # rank 2's result, as a host array
    prof = trnsim.multirank.profile_of(run)   # one timeline: every rank, its transfers

A rank is a logical NeuronCore (NRT: "each rank can be represented by a physical or logical
Neuron Core"); rank r runs on chip r // ranks_per_chip of the topology. Each rank gets its own
simulated device (its own HBM); its LNC programs and every other rank's run cooperatively in
threads, one at a time (trnsim.nki.lnc's baton), so a collective blocks its caller until every
rank of its rank list has arrived, and a launch is bit-identical run to run. Every issued
instruction is also logged in world order: the causal order the timing model needs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from trnsim import wide_fp
from trnsim.core import Device
from trnsim.errors import ConstraintError, KernelError
from trnsim.gcpause import gc_paused
from trnsim.nki import liveness
from trnsim.nki.context import KernelContext, maybe_current
from trnsim.nki.host_io import HostArgument, guard_writes, write_back
from trnsim.nki.lnc import Programs
from trnsim.nki.runner import (
    _arg_to_device,
    _first_torch,
    _parameter_names,
    _result_to_host,
    _run_program,
    _warn_hidden_hazards,
    _warn_races,
    resolve_chip,
)
from trnsim.nki.tensor import check_ga_outputs
from trnsim.nki.typing import check_annotations
from trnsim.program import capture_location


class _LoggedProgram(list):
    """A rank device's program record that also logs each instruction in world order."""

    def __init__(self, log: list[tuple[int, int]], rank: int):
        super().__init__()
        self._log, self._rank = log, rank

    def append(self, ins: Any) -> None:
        super().append(ins)
        self._log.append((self._rank, ins.index))


class WorldPrograms(Programs):
    """The baton over every program of every rank; deadlocks name ranks and collectives."""

    def __init__(self, ranks: int, lnc: int):
        super().__init__(ranks * lnc)
        self.lnc = lnc

    def who(self, p: int) -> str:
        r, c = divmod(p, self.lnc)
        return f"rank {r}" + (f" (core {c})" if self.lnc > 1 else "")

    def _deadlock(self, blocked: list[int]) -> KernelError:
        q = blocked[0]
        wait = self._waits[q]
        others = []
        for r in range(self.count):
            if r == q:
                continue
            if self._status[r] == "done":
                others.append(f"{self.who(r)} finished without reaching it")
            elif self._status[r] == "blocked" and self._waits[r] is not None:
                w = self._waits[r]
                where = f" ({w.loc.short()})" if w.loc is not None else ""
                others.append(f"{self.who(r)} waits at {w.what}{where}")
        what = wait.what if wait is not None else "a collective"
        return KernelError(
            f"deadlock: {self.who(q)} waits at {what}, but {'; '.join(others)}; every rank of "
            "a replica group must issue the same collectives in the same order",
            wait.loc if wait is not None else None)


class RankPrograms:
    """What one rank's LNC programs see as `ctx.extra["lnc"]`: their own rendezvous state
    (core_barrier, sendrecv pair up within the rank), blocking on the world's baton."""

    def __init__(self, world: WorldPrograms, rank: int, lnc: int):
        self.world, self.rank, self.count = world, rank, lnc
        self.state: dict[str, Any] = {}

    def wait_until(self, program: int, ready: Callable[[], bool], what: str, loc: Any) -> None:
        self.world.wait_until(self.rank * self.count + program, ready, what, loc)

    def tick(self, program: int) -> None:
        """Ranks switch only where a program blocks (a collective, a barrier) or ends: each
        rank has its own HBM, so no two of them race on memory; the world log keeps that order."""


@dataclass
class World:
    """The ranks of one launch: devices, topology, baton, collective records, world log."""

    chip: Any
    topology: Any
    ranks: int
    lnc: int
    devices: list[Device]
    programs: WorldPrograms
    log: list[tuple[int, int]] = field(default_factory=list)
    calls: list[Any] = field(default_factory=list)  # timing.world.CollectiveRecord, in order
    state: dict[str, Any] = field(default_factory=dict)  # rendezvous: (key, k) -> arrivals

    def rank_of(self, ctx: KernelContext) -> tuple[int, int]:
        """(rank, program within the rank) of a running program."""
        return ctx.extra["rank"], (ctx.program_id[0] if ctx.program_id else 0)


@dataclass
class RanksRun:
    """A finished multi-rank launch: per-rank outputs and program records, the world log."""

    outputs: list[Any]
    world: World
    kernel_name: str = ""

    @property
    def programs(self) -> list[list[Any]]:
        return [d.program for d in self.world.devices]

    def timing(self, reorder: bool = True) -> Any:
        """Every rank scheduled together on the topology (trnsim.timing.world.WorldTiming;
        trnsim.multirank.RanksProfile wraps it with metrics and a timeline)."""
        from trnsim.timing.world import time_world

        w = self.world
        return time_world(self.programs, w.log, w.calls, w.topology, w.lnc, w.chip, reorder)


def world_of(ctx: KernelContext, api: str) -> World:
    """The running multi-rank launch, or an error saying how to make one."""
    world = ctx.extra.get("world")
    if world is None:
        raise ConstraintError(
            f"nki.collectives.{api}: this kernel was launched on one rank; collectives need a "
            "multi-rank launch: trnsim.nki.run_ranks(kernel, per_rank_args, chip=..., "
            "topology=...) or nki.simulate(kernel, ranks=N)", capture_location())
    return world


def _resolve_topology(topology: Any, chip: Any) -> Any:
    from trnsim.topology import default_topology, load_topology

    if topology is None:
        name = default_topology(chip)
        if not name:
            raise ConstraintError(f"run_ranks: no built-in topology for chip {chip.name}; "
                                  "pass topology= (a name or a YAML file)")
        topology = name
    topo = load_topology(topology)
    return topo


def run_ranks(kernel: Any, args: Sequence[Sequence[Any]] | Callable[[int], Sequence[Any]],
              kwargs: dict[str, Any] | Callable[[int], dict[str, Any]] | None = None, *,
              ranks: int | None = None,
              chip: Any = None, topology: Any = None, lnc: int = 1, values: bool = True,
              seed: int = 0) -> RanksRun:
    """Launch `kernel` on `ranks` ranks: rank r gets the arguments args[r] (or args(r)) and
    the keyword arguments `kwargs` (the same for every rank) or kwargs(r).

    chip: default NEURON_PLATFORM_TARGET_OVERRIDE, else trn3; topology: a built-in name or a
    YAML file, default the chip's largest (trn2-ultraserver, trn3-ultraserver-gen2); lnc: 1 or
    2 physical cores per rank. Returns per-rank host outputs; `.profile()` times the launch.
    """
    if maybe_current() is not None:
        raise KernelError("a kernel launch cannot be nested inside a running kernel",
                          capture_location())
    from trnsim.nki.jit import _as_kernel

    k = _as_kernel(kernel)
    if k.generation == "ga" and k.grid:
        lnc = k.lnc
    spec = resolve_chip(chip)
    topo = _resolve_topology(topology, spec)
    if topo.chip.name != spec.name:
        spec = topo.chip
    if lnc not in spec.lnc_allowed:
        raise ConstraintError(f"run_ranks: lnc={lnc}: {spec.name} supports logical NeuronCore "
                              f"configs {', '.join(map(str, spec.lnc_allowed))}")
    per_rank = [tuple(args(r)) for r in range(ranks or 0)] if callable(args) else \
        [tuple(a) for a in args]
    per_rank_kw = [dict(kwargs(r) if callable(kwargs) else kwargs or {})
                   for r in range(len(per_rank))]
    n = ranks if ranks is not None else len(per_rank)
    if len(per_rank) != n or n < 1:
        raise ConstraintError(f"run_ranks: {len(per_rank)} argument tuples for ranks={n}; "
                              "give one tuple per rank")
    cap = topo.max_ranks(lnc)
    if n > cap:
        raise ConstraintError(f"run_ranks: {n} ranks do not fit {topo.name}: {topo.chips} "
                              f"{spec.name} chips x {topo.ranks_per_chip(lnc)} logical cores "
                              f"at LNC={lnc} = {cap} ranks")
    def attempt(plan: liveness.Plan | None) -> tuple[World, list[Any], list[Any]]:
        programs = WorldPrograms(n, lnc)
        world = World(spec, topo, n, lnc, [], programs)
        bodies, hosts = [], []
        for r in range(n):
            dev = Device(spec, values=values, seed=seed + r)
            dev.program = _LoggedProgram(world.log, r)
            world.devices.append(dev)
            host: list[HostArgument] = []
            labels = _parameter_names(k.fn, len(per_rank[r]))
            try:
                dargs = [_arg_to_device(dev, a, f"arg{i}", f"{labels[i]} of rank {r}", host)
                         for i, a in enumerate(per_rank[r])]
                dkw = {key: _arg_to_device(dev, v, key, f"{key} of rank {r}", host)
                       for key, v in per_rank_kw[r].items()}
            except KernelError as e:  # an argument refused: at the line that launched it
                raise e.with_loc(capture_location()) from None
            if values and guard_writes(host):
                dev.guarded = True
            check_annotations(k.fn, dargs, dkw)
            hosts.append(host)
            shared: dict[Any, Any] = {}
            rank_progs = RankPrograms(programs, r, lnc)
            for c in range(lnc):
                grid = (lnc,) if lnc > 1 else ()
                ctx = KernelContext(dev, dev.core(c), (c,) if lnc > 1 else (), grid, "ga")
                ctx.extra.update(shared_allocs=shared, shared_seq=0, world=world, rank=r,
                                 liveness=plan)
                if lnc > 1:
                    ctx.extra["lnc"] = rank_progs
                bodies.append(functools.partial(_run_program, ctx, k.fn, dargs, dkw))
        try:
            with gc_paused(), wide_fp.launch():
                results = programs.run(bodies)
        finally:  # pending arrivals hold their programs' contexts, which hold the world
            world.state.clear()
        return world, results, hosts

    # Every rank starts from host arrays, so the launch can run again: tiles are freed after
    # their last use when memory is full (trnsim.nki.liveness), as in a one-rank launch.
    world, results, hosts = liveness.run_with_plan(attempt)
    outputs = []
    for r in range(n):
        prog = world.devices[r].program
        if lnc > 1:
            _warn_races(prog)
        _warn_hidden_hazards(prog)
        result = results[r * lnc + lnc - 1]
        check_ga_outputs(result, k.fn)
        like = _first_torch(per_rank[r], per_rank_kw[r])
        outputs.append(_result_to_host(result, like) if values else None)
        if values:
            write_back(hosts[r])
    return RanksRun(outputs, world, getattr(k.fn, "__name__", str(k.fn)))
