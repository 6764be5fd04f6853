"""torch.distributed on the simulated device: the `trn` backend (`neuron` in alias mode).

    dist.init_process_group("trn")          # torchrun or mp.spawn: one process per rank
    model = DDP(model) / fully_shard(model, mesh=init_device_mesh("trn", (ws,)))
    with trnsim.backend.distributed.profile_step() as step:
        loss = model(x); loss.backward(); opt.step()
    print(step.summary().text())            # per rank: compute vs collective, exposed, bound
    step.save("step.pftrace")               # rank 0 writes one timeline of every rank

Each process simulates one logical NeuronCore; rank r sits on the topology's chip
r // ranks_per_chip (state.py). `init_virtual_world(n)` lets one process stand for all n
ranks (timing only: no data moves) to time steps at UltraServer scale.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from trnsim.backend.runtime import Runtime, runtime

__all__ = ["TrnOptions", "init_virtual_world", "install", "profile_step"]


class TrnOptions:
    """Backend options (init_process_group(pg_options=...)): virtual=True makes this process
    every rank of the world (timing only)."""

    def __init__(self, virtual: bool = False):
        self.virtual = virtual


def install(rt: Runtime) -> None:
    """Register the backend under the device's name (run once by trnsim.backend.register)."""
    import torch.distributed as dist

    if not dist.is_available() or rt.name.upper() in dist.Backend._plugins:
        return
    dist.Backend.register_backend(rt.name, _create, extended_api=True, devices=[rt.name])


def _create(opts: Any, backend_options: Any) -> Any:
    from trnsim.backend.distributed import fsdp
    from trnsim.backend.distributed.process_group import TrnProcessGroup
    from trnsim.backend.distributed.state import DistributedError, state, timeout_s

    rt = runtime()
    st = state(rt)
    size, rank, name = opts.group_size, opts.group_rank, str(opts.group_id)
    default = not list(opts.global_ranks_in_group) or name == "0"
    if isinstance(backend_options, TrnOptions) and backend_options.virtual:
        st.virtual = True
    if not 0 <= rank < size:
        raise DistributedError(f"init_process_group: rank {rank} is not a rank of a world of "
                               f"{size} (ranks 0..{size - 1})")
    if default:
        st.check_world_size(size, rt.chip.name)
        st.world_size, st.rank = size, rank
    default_s = opts.timeout.total_seconds()
    wait = functools.partial(timeout_s, default_s)
    pg = TrnProcessGroup(rt, st, opts.store, rank, size, opts.timeout, name,
                         list(opts.global_ranks_in_group), wait)
    if default and not st.virtual:
        _check_world(pg, rt, st)
    pg.connect()
    fsdp.install(rt.name)
    return pg


def _check_world(pg: Any, rt: Runtime, st: Any) -> None:
    """Every rank was started with the same world size, chip, topology and LNC: each posts
    its settings, and each compares the others' as they arrive (a rank told a larger world
    learns of it from the first rank that answers, not after a timeout)."""
    import time

    from trnsim.backend.distributed.state import DistributedError

    mine = {"world_size": st.world_size, "rank": st.rank, "chip": rt.chip.name,
            "topology": st.topology.name, "lnc": st.lnc, "device": rt.name}
    ex = pg._exchange
    ex.store.set(f"init/{ex.rank}", json.dumps(mine))
    seen: set[int] = {ex.rank}
    deadline = time.monotonic() + ex.timeout_s
    while len(seen) < st.world_size:
        for r in range(st.world_size):
            if r in seen or not ex.store.check([f"init/{r}"]):
                continue
            seen.add(r)
            theirs = json.loads(ex.store.get(f"init/{r}"))
            for k in ("world_size", "chip", "topology", "lnc", "device"):
                if theirs[k] != mine[k]:
                    _raise_after_peers_read(ex, seen, DistributedError(
                        f"init_process_group: rank {r} was started with {k}={theirs[k]!r}, "
                        f"rank {st.rank} with {k}={mine[k]!r}; every rank needs the same "
                        "WORLD_SIZE, TRNSIM_CHIP, TRNSIM_TOPOLOGY, TRNSIM_LNC and "
                        "TRNSIM_DEVICE"))
        if len(seen) < st.world_size:
            if time.monotonic() > deadline:
                missing = sorted(set(range(st.world_size)) - seen)
                raise DistributedError(
                    f"init_process_group: ranks {missing} of a world of {st.world_size} never "
                    f"joined within {ex.timeout_s:g} s; check WORLD_SIZE and RANK on every "
                    "process")
            time.sleep(0.005)
    ex.store.set(f"init/read/{ex.rank}", "1")


def _raise_after_peers_read(ex: Any, seen: set[int], error: Exception) -> None:
    """Raise `error` once the ranks seen have read this rank's settings too (or after a few
    seconds): the rank holding the store must not exit before the others learn the same
    mismatch, or they would see a closed connection instead of it."""
    import time

    ex.store.set(f"init/read/{ex.rank}", "1")
    others = [f"init/read/{r}" for r in seen if r != ex.rank]
    stop = time.monotonic() + min(10.0, ex.timeout_s)
    while others and time.monotonic() < stop:
        others = [k for k in others if not ex.store.check([k])]
        time.sleep(0.005)
    raise error


def init_virtual_world(world_size: int, rank: int = 0) -> None:
    """This process becomes rank `rank` of a world of `world_size` ranks and stands for all
    of them: collectives move no data (each result comes from this rank's data alone), their
    simulated time is that of the whole world on the topology. For timing steps at scale."""
    import torch.distributed as dist

    dist.init_process_group(runtime().name, rank=rank, world_size=world_size,
                            store=dist.HashStore(), pg_options=TrnOptions(virtual=True))


def profile_step(**kwargs: Any) -> Any:
    """`with profile_step() as step:` on every rank: its launches and collectives
    (backend/distributed/steps.py StepProfile)."""
    from trnsim.backend.distributed.steps import StepProfile

    return StepProfile(**kwargs)
