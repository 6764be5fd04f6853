"""Train the llama debug model with FSDP2 on the `trn` torch.distributed backend, one process
per simulated NeuronCore, and print each step's loss and the last step's time per rank.

    torchrun --nproc-per-node 2 examples/torch/train_fsdp.py [--steps 3] [--mode kernel]
    # two hosts (or two shells on one machine): the data moves over gloo, as torchrun does it
    torchrun --nnodes 2 --node-rank 0 --nproc-per-node 1 --master-addr HOST --master-port 29500 \
        examples/torch/train_fsdp.py
    torchrun --nnodes 2 --node-rank 1 --nproc-per-node 1 --master-addr HOST --master-port 29500 \
        examples/torch/train_fsdp.py

Every rank trains on its own batch; with --check it also runs the same steps on the CPU over a
gloo group and exits non-zero unless the losses agree. Rank 0 writes the last step's timeline
of every rank to <out>/train_fsdp.pftrace (open it in ui.perfetto.dev).
"""

from __future__ import annotations

import argparse
import copy
import os

import torch
import torch.distributed as dist
import trnsim.backend
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from trnsim.backend.distributed import profile_step
from trnsim.backend.distributed.llama import Llama, LlamaConfig, apply_fsdp, batch, loss_fn

DEV = trnsim.backend.runtime.name


def train(model, device, steps, rank, cfg, profile_last):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, foreach=False)
    losses, prof = [], None
    for step in range(steps):
        tok, tgt = batch(cfg, step, 2, 16, rank)
        prof = profile_step() if profile_last and step == steps - 1 else None
        if prof is not None:
            prof.__enter__()
        loss = loss_fn(model(tok.to(device)), tgt.to(device))
        loss.backward()
        opt.step()
        opt.zero_grad()
        if prof is not None:
            prof.__exit__(None, None, None)
        losses.append(loss.item())
    return losses, prof


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--mode", choices=["kernel", "reference"], default="kernel")
    p.add_argument("--check", action="store_true", help="compare with CPU + gloo")
    p.add_argument("--out", default="out")
    args = p.parse_args()
    trnsim.backend.runtime.mode = args.mode
    dist.init_process_group(DEV)
    rank, ws = dist.get_rank(), dist.get_world_size()
    getattr(torch, DEV).set_device(int(os.environ.get("LOCAL_RANK", "0")))
    torch.manual_seed(0)
    cfg = LlamaConfig()
    base = Llama(cfg)
    model = apply_fsdp(copy.deepcopy(base).to(DEV), init_device_mesh(DEV, (ws,)))
    losses, prof = train(model, DEV, args.steps, rank, cfg, profile_last=True)
    summary = prof.summary()  # a collective itself: every rank calls it
    if rank == 0:
        for i, loss in enumerate(losses):
            print(f"step {i}: loss {loss:.4f}")
        print(summary.text())
        os.makedirs(args.out, exist_ok=True)
    prof.save(os.path.join(args.out, "train_fsdp.pftrace"))
    status = 0
    if args.check:
        gloo = dist.new_group(backend="gloo")
        cpu = apply_fsdp(copy.deepcopy(base), DeviceMesh.from_group(gloo, "cpu"))
        ref, _ = train(cpu, "cpu", args.steps, rank, cfg, profile_last=False)
        rtol = 1e-4 if args.mode == "kernel" else 1e-6
        ok = torch.allclose(torch.tensor(losses), torch.tensor(ref), rtol=rtol, atol=0)
        print(f"rank {rank}: trn {losses} cpu+gloo {ref}: "
              f"{'equal' if ok else 'DIFFERENT'} (rtol {rtol})")
        status = 0 if ok else 1
    dist.destroy_process_group()
    raise SystemExit(status)


if __name__ == "__main__":
    main()
