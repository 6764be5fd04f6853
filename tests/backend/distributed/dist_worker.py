"""One rank of a multi-process test (run as a script by harness.py): the `trn` process group
next to a gloo group on the CPU, the same steps on both; results into <outdir>/rank<r>.pt."""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from datetime import timedelta

import torch
import torch.distributed as dist
import trnsim.backend

DEV = trnsim.backend.runtime.name


def _rank_tensor(rank, shape, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed * 100 + rank)
    return torch.randn(shape, generator=g).to(dtype)


def collectives(rank, ws, out):
    """Every collective on device tensors; inputs and outputs are saved for numpy checks."""
    import torch.distributed._functional_collectives as fc

    res = {}
    x = _rank_tensor(rank, (4, 6), 1)
    t = x.to(DEV)
    dist.all_reduce(t)
    res["all_reduce"] = t.cpu()
    t = x.to(DEV)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    res["all_reduce_max"] = t.cpu()
    t = x.to(DEV)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    res["all_reduce_avg"] = t.cpu()
    t = x.to(DEV)
    dist.broadcast(t, src=ws - 1)
    res["broadcast"] = t.cpu()
    o = torch.empty(4 * ws, 6, device=DEV)
    dist.all_gather_into_tensor(o, x.to(DEV))
    res["all_gather_into_tensor"] = o.cpu()
    lst = [torch.empty(4, 6, device=DEV) for _ in range(ws)]
    dist.all_gather(lst, x.to(DEV))
    res["all_gather"] = torch.stack([a.cpu() for a in lst])
    big = _rank_tensor(rank, (2 * ws, 3), 2)
    r = torch.empty(2, 3, device=DEV)
    dist.reduce_scatter_tensor(r, big.to(DEV))
    res["reduce_scatter_tensor"] = r.cpu()
    r2 = torch.empty(2, 3, device=DEV)
    dist.reduce_scatter(r2, [c.to(DEV) for c in big.chunk(ws)])
    res["reduce_scatter"] = r2.cpu()
    a = torch.empty(2 * ws, 3, device=DEV)
    dist.all_to_all_single(a, big.to(DEV))
    res["all_to_all_single"] = a.cpu()
    # uneven: rank s sends s+1 rows to every rank
    src = _rank_tensor(rank, ((rank + 1) * ws, 2), 3)
    out_rows = [s + 1 for s in range(ws)]
    a2 = torch.empty(sum(out_rows), 2, device=DEV)
    dist.all_to_all_single(a2, src.to(DEV), output_split_sizes=out_rows,
                           input_split_sizes=[rank + 1] * ws)
    res["all_to_all_uneven"] = a2.cpu()
    p = torch.empty(4, 6, device=DEV)
    reqs = [dist.isend(x.to(DEV), (rank + 1) % ws), dist.irecv(p, (rank - 1) % ws)]
    for q in reqs:
        q.wait()
    res["send_recv"] = p.cpu()
    res["funcol_all_reduce"] = fc.all_reduce(x.to(DEV), "sum", dist.group.WORLD).cpu()
    res["funcol_all_gather"] = fc.all_gather_tensor(x.to(DEV), 0, dist.group.WORLD).cpu()
    res["funcol_reduce_scatter"] = fc.reduce_scatter_tensor(big.to(DEV), "sum", 0,
                                                            dist.group.WORLD).cpu()
    dist.barrier()
    res["clock"] = torch.tensor(getattr(torch, DEV).simulated_time_ns(), dtype=torch.float64)
    out.update({f"cc/{k}": v for k, v in res.items()})
    st = trnsim.backend.runtime.distributed
    out["cc/events"] = [(e.api, e.nbytes, e.algorithm, e.start_ns, e.end_ns, list(e.group))
                        for e in st.events]
    out["cc/device"] = str(t.device)


def _clone_to(model, device):
    import copy

    m = copy.deepcopy(model)
    return m.to(device)


def _full(t):
    from torch.distributed.tensor import DTensor

    if isinstance(t, DTensor):
        t = t.full_tensor()
    return t.detach().cpu().clone()


def ddp(rank, ws, out, gloo):
    from torch.nn.parallel import DistributedDataParallel as DDP
    from trnsim.backend.models import MLP

    torch.manual_seed(0)
    base = MLP(16, 32, 4)
    for name, device, group in (("trn", DEV, None), ("cpu", "cpu", gloo)):
        model = DDP(_clone_to(base, device), process_group=group)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        losses = []
        for step in range(2):
            xb = _rank_tensor(rank, (8, 16), 10 + step).to(device)
            yb = (torch.arange(8) % 4).to(device)
            loss = torch.nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
        out[f"ddp/{name}/losses"] = torch.tensor(losses)
        for k, v in model.module.state_dict().items():
            out[f"ddp/{name}/{k}"] = v.cpu()


def _llama_steps(model, device, steps, rank, cfg, lr, opt_name="adamw", step_hook=None):
    from trnsim.backend.distributed.llama import batch, loss_fn

    opt = (torch.optim.AdamW(model.parameters(), lr=lr, foreach=False) if opt_name == "adamw"
           else torch.optim.SGD(model.parameters(), lr=lr, foreach=False))
    losses = []
    for step in range(steps):
        tok, tgt = batch(cfg, 0, 2, 16, rank)  # the same batch each step: the loss falls
        ctx = step_hook(step) if step_hook else None
        if ctx is not None:
            ctx.__enter__()
        loss = loss_fn(model(tok.to(device)), tgt.to(device))
        loss.backward()
        opt.step()
        opt.zero_grad()
        if ctx is not None:
            ctx.__exit__(None, None, None)
        losses.append(loss.item())
    return losses


def fsdp(rank, ws, out, gloo, steps=3, outdir=None):
    from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
    from trnsim.backend.distributed import profile_step
    from trnsim.backend.distributed.llama import Llama, LlamaConfig, apply_fsdp

    torch.manual_seed(0)
    cfg = LlamaConfig()
    base = Llama(cfg)
    profiles = {}

    def hook(step):
        if step == steps - 1:
            profiles["p"] = profile_step()
            return profiles["p"]
        return None

    for name, device in (("trn", DEV), ("cpu", "cpu")):
        mesh = (init_device_mesh(DEV, (ws,)) if name == "trn"
                else DeviceMesh.from_group(gloo, "cpu"))
        model = apply_fsdp(_clone_to(base, device), mesh)
        losses = _llama_steps(model, device, steps, rank, cfg, 1e-2,
                              step_hook=hook if name == "trn" else None)
        out[f"fsdp/{name}/losses"] = torch.tensor(losses)
        for k, v in model.state_dict().items():
            out[f"fsdp/{name}/{k}"] = _full(v)
    p = profiles["p"]
    s = p.summary()
    out["fsdp/summary"] = json.dumps(s.as_dict())
    out["fsdp/step_ns"] = torch.tensor(p.step_ns, dtype=torch.float64)
    if outdir:
        p.save(os.path.join(outdir, "fsdp_step.pftrace"))


def tp(rank, ws, out, gloo):
    from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
    from trnsim.backend.distributed.llama import Llama, LlamaConfig, apply_tp

    torch.manual_seed(0)
    cfg = LlamaConfig(n_heads=4, n_kv_heads=4 if ws > 2 else 2)
    base = Llama(cfg)
    for name, device in (("trn", DEV), ("cpu", "cpu")):
        mesh = (init_device_mesh(DEV, (ws,)) if name == "trn"
                else DeviceMesh.from_group(gloo, "cpu"))
        model = apply_tp(_clone_to(base, device), mesh)
        losses = _llama_steps(model, device, 2, 0, cfg, 0.1, "sgd")
        out[f"tp/{name}/losses"] = torch.tensor(losses)
        for k, v in model.state_dict().items():
            out[f"tp/{name}/{k}"] = _full(v)


def errors(rank, ws, out):
    """A mismatched collective, then a rank that skips one: both must raise, never hang."""
    from trnsim.backend.distributed.state import DistributedError

    dist.barrier()  # under the group's timeout: the ranks start the short waits together
    os.environ["TRNSIM_DIST_TIMEOUT"] = os.environ.get("TEST_ERRORS_TIMEOUT", "3")
    try:
        dist.all_reduce(torch.ones(3 if rank == 0 else 5, device=DEV))
    except DistributedError as e:
        out["mismatch"] = str(e)
    dist.barrier()
    try:
        if rank != ws - 1:  # the last rank skips this all_reduce
            dist.all_reduce(torch.ones(4, device=DEV))
        else:
            out["skipped"] = "yes"
    except DistributedError as e:
        out["deadlock"] = str(e)


def virtual(out):
    """One process as every rank of a TEST_VIRTUAL_WORLD-rank world (timing only): a
    collective's time is the whole world's; an FSDP2 step of the llama debug model runs."""
    from torch.distributed.device_mesh import init_device_mesh
    from trnsim.backend.distributed import init_virtual_world, profile_step
    from trnsim.backend.distributed.llama import Llama, LlamaConfig, apply_fsdp, batch, loss_fn

    n = int(os.environ.get("TEST_VIRTUAL_WORLD", "576"))
    init_virtual_world(n)
    t = torch.ones(1024, device=DEV)
    dist.all_reduce(t)
    out["virtual/all_reduce"] = t.cpu()
    cfg = LlamaConfig()
    model = apply_fsdp(Llama(cfg).to(DEV), init_device_mesh(DEV, (n,)))
    tok, tgt = batch(cfg, 0, 2, 16)
    with profile_step() as p:
        loss_fn(model(tok.to(DEV)), tgt.to(DEV)).backward()
    out["virtual/events"] = [(e.api, e.nbytes, e.algorithm, e.start_ns, e.end_ns, len(e.group))
                             for e in trnsim.backend.runtime.distributed.events]
    out["virtual/step_ns"] = p.step_ns
    out["virtual/summary"] = p.summary().as_dict()


def run(scenario: str, rank: int, ws: int, port: str, outdir: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=str(rank),
                      WORLD_SIZE=str(ws))
    mode = os.environ.get("TRNSIM_MODE")
    if mode:  # the forkserver registered the device before this rank's environment was set
        trnsim.backend.runtime.mode = mode
    out: dict = {}
    try:
        claimed = int(os.environ.get("TEST_WORLD_SIZE_AS", ws)) if rank == 1 else ws
        if scenario == "virtual":
            virtual(out)
            claimed = 0
        else:
            dist.init_process_group(DEV, rank=rank, world_size=claimed,
                                    timeout=timedelta(seconds=60))
        if os.environ.get("TEST_SET_DEVICE"):  # address the rank's core by its local rank
            getattr(torch, DEV).set_device(rank)
            out["alias"] = str(torch.ones(2, device=f"{DEV}:{rank}").device)
            try:
                torch.ones(2, device=f"{DEV}:{rank + 1}")
            except (RuntimeError, ValueError) as e:
                out["other_index"] = str(e)
        if scenario == "virtual":
            pass
        elif scenario == "collectives":
            collectives(rank, ws, out)
        elif scenario == "main":
            gloo = dist.new_group(backend="gloo")
            sections = [("collectives", lambda: collectives(rank, ws, out)),
                        ("ddp", lambda: ddp(rank, ws, out, gloo)),
                        ("fsdp", lambda: fsdp(rank, ws, out, gloo, outdir=outdir)),
                        ("tp", lambda: tp(rank, ws, out, gloo))]
            if os.environ.get("TEST_THEN_ERRORS"):
                sections.append(("errors", lambda: errors(rank, ws, out)))
            for name, fn in sections:  # wall time per section, for whoever tunes the tests
                t0 = time.perf_counter()
                fn()
                out[f"wall/{name}"] = time.perf_counter() - t0
        elif scenario == "errors":
            errors(rank, ws, out)
        out["ok"] = True
    except Exception as e:  # reported to the test, which decides
        out["error"] = f"{type(e).__name__}: {e}"
        out["traceback"] = traceback.format_exc()
    torch.save(out, os.path.join(outdir, f"rank{rank}.pt"))
    os._exit(0)  # skip interpreter teardown (gloo threads of a peer that failed or skipped)


def child(scenario: str, rank: int, ws: int, port: str, outdir: str, env: dict) -> None:
    """A rank forked from the harness's forkserver: its environment, its log, then run."""
    os.environ.update(env)
    fd = os.open(os.path.join(outdir, f"rank{rank}.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    run(scenario, rank, ws, port, outdir)


if __name__ == "__main__":
    run(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5])
