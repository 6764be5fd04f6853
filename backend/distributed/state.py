"""One process's side of a distributed run: its rank, the topology it sits in, its collectives.

Each process simulates one logical NeuronCore (rank r of the world); the topology
(TRNSIM_TOPOLOGY, default the chip's largest: trn2-ultraserver, trn3-ultraserver-gen2) places
rank r on chip r // ranks_per_chip at TRNSIM_LNC (default the chip's, 2 on trn2/trn3). A
collective's simulated time comes from trnsim.timing.collectives on that placement; every
rank's device clock jumps to the collective's end (eager collectives complete before the
rank goes on: no overlap with compute is modelled). The record of each collective feeds the
step metrics and the merged timeline (backend/distributed/steps.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from trnsim.backend.runtime import Runtime

from trnsim.timing.collectives import plan_collective
from trnsim.topology import default_topology, load_topology

ENV_TOPOLOGY = "TRNSIM_TOPOLOGY"
ENV_LNC = "TRNSIM_LNC"
ENV_TIMEOUT = "TRNSIM_DIST_TIMEOUT"  # seconds a rank waits for the others at a collective


class DistributedError(RuntimeError):
    """A distributed run went wrong: ranks disagree, or one never reached a collective."""


@dataclass
class CollectiveEvent:
    """One collective on this rank, on the device clock (ns)."""

    seq: int
    api: str  # the torch.distributed call, e.g. "all_reduce"
    group: tuple[int, ...]  # global ranks
    nbytes: int
    algorithm: str
    arrive_ns: float  # this rank's clock when it called
    start_ns: float  # when the last rank of the group arrived
    end_ns: float
    where: str = ""  # the user's file:line


@dataclass
class DistState:
    """The rank's distributed state, hung off the Runtime (`rt.distributed`)."""

    topology: Any
    lnc: int
    world_size: int = 1
    rank: int = 0
    virtual: bool = False  # one process stands for every rank (timing only)
    events: list[CollectiveEvent] = field(default_factory=list)

    def check_world_size(self, size: int, chip_name: str) -> None:
        """A world must fit the topology: chips x logical cores per chip at this LNC."""
        cap = self.topology.max_ranks(self.lnc)
        if size > cap:
            raise DistributedError(
                f"init_process_group: world_size {size} does not fit {self.topology.name}: "
                f"{self.topology.chips} {chip_name} chips x "
                f"{self.topology.ranks_per_chip(self.lnc)} logical NeuronCores at "
                f"LNC={self.lnc} = {cap} ranks (TRNSIM_TOPOLOGY, TRNSIM_LNC)")

    def time_collective(self, op: str, nbytes: int, group: tuple[int, ...],
                        pairs: tuple | None = None, root: int = 0) -> tuple[float, str]:
        """(ns, algorithm) of one collective on the topology."""
        if len(group) <= 1 and op != "permute":
            return 0.0, "local"
        plan = plan_collective(op, nbytes, group, self.topology, self.lnc, root=root,
                               pairs=pairs)
        return plan.total_ns, plan.algorithm


def state(rt: Runtime) -> DistState:
    """The rank's DistState, made on first use from the environment and the chip."""
    st = rt.distributed
    if st is None:
        st = rt.distributed = _from_environment(rt)
    return st


def _from_environment(rt: Runtime) -> DistState:
    chip = rt.chip
    name = os.environ.get(ENV_TOPOLOGY, "").strip() or default_topology(chip)
    if not name:
        raise DistributedError(f"{ENV_TOPOLOGY}: no built-in topology has {chip.name} chips; "
                               "set it to a topology YAML file")
    topo = load_topology(name)
    if topo.chip.name != chip.name:
        raise DistributedError(
            f"{ENV_TOPOLOGY}={name}: that topology is built of {topo.chip.name} chips, but the "
            f"device simulates {chip.name} (TRNSIM_CHIP); pick a topology of {chip.name} chips")
    raw = os.environ.get(ENV_LNC, "").strip()
    lnc = int(raw) if raw.isdigit() else chip.lnc_default
    if lnc not in chip.lnc_allowed:
        raise DistributedError(f"{ENV_LNC}={raw}: {chip.name} supports logical NeuronCore "
                               f"configs {', '.join(map(str, chip.lnc_allowed))}")
    return DistState(topo, lnc)


def timeout_s(default: float) -> float:
    """TRNSIM_DIST_TIMEOUT if set, else the process group's timeout."""
    raw = os.environ.get(ENV_TIMEOUT, "").strip()
    try:
        return float(raw) if raw else default
    except ValueError:
        raise DistributedError(f"{ENV_TIMEOUT}={raw!r}: give seconds, e.g. 60") from None
