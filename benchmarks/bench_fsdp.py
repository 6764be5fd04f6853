"""Simulated time of one FSDP2 training step of the llama debug model on 8, 64 and 144
Trainium3 chips (Trn3 Gen2 UltraServer, LNC=2: 4 ranks per chip), and the wall time it took.

One process stands for every rank (trnsim.backend.distributed.init_virtual_world): its own
compute runs in kernel mode (NKI kernels on the simulated NeuronCore, timed), and each
collective is timed on the topology for the whole world; no data moves between ranks, so the
values are timing-only. Every rank runs the same step on its own batch, so this rank's device
clock is the step's time. Each world size runs in its own subprocess (one world per process).

    python benchmarks/bench_fsdp.py [--chips 8 64 144] [--steps 2] [--flavor torchtitan]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

DEFAULT_CHIPS = (8, 64, 144)


def one_world(chips: int, steps: int, flavor: str, seq: int) -> dict:
    import torch
    import trnsim.backend
    from trnsim.backend.distributed import init_virtual_world, profile_step
    from trnsim.backend.distributed.llama import Llama, LlamaConfig, apply_fsdp, batch, loss_fn
    from trnsim.backend.distributed.state import state

    rt = trnsim.backend.runtime
    st = state(rt)
    world = chips * st.topology.ranks_per_chip(st.lnc)
    t0 = time.perf_counter()
    init_virtual_world(world)
    from torch.distributed.device_mesh import init_device_mesh

    torch.manual_seed(0)
    cfg = LlamaConfig.torchtitan_debug() if flavor == "torchtitan" else LlamaConfig()
    model = apply_fsdp(Llama(cfg).to(rt.name), init_device_mesh(rt.name, (world,)))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)
    profile = None
    for step in range(steps):  # the first step warms up; the last is measured
        tok, tgt = batch(cfg, step, 2, seq)
        with profile_step() as p:
            loss_fn(model(tok.to(rt.name)), tgt.to(rt.name)).backward()
            opt.step()
            opt.zero_grad()
        profile = p
    s = profile.summary()
    r = s.ranks[0]
    return {"chips": chips, "ranks": world, "topology": st.topology.name,
            "step_us": profile.step_ns / 1000, "compute_us": r.compute_ns / 1000,
            "collective_us": r.collective_ns / 1000, "bound": s.bound,
            "collectives": len(profile.events), "wall_s": time.perf_counter() - t0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chips", type=int, nargs="+", default=list(DEFAULT_CHIPS))
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--flavor", choices=("small", "torchtitan"), default="small",
                    help="small: LlamaConfig() (dim 64, 2 layers); torchtitan: the sizes of "
                    "TorchTitan's debugmodel (dim 256, 6 layers)")
    ap.add_argument("--seq", type=int, default=32, help="tokens per sequence (batch 2)")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one_world(args.one, args.steps, args.flavor, args.seq)))
        return
    env = {**os.environ, "TRNSIM_CHIP": "trn3", "TRNSIM_MODE": "kernel",
           "TRNSIM_TOPOLOGY": "trn3-ultraserver-gen2"}
    print(f"{'chips':>6} {'ranks':>6} {'step us':>10} {'compute us':>11} {'collective us':>14} "
          f"{'bound':>14} {'wall s':>8}")
    for chips in args.chips:
        t = time.perf_counter()
        out = subprocess.run([sys.executable, __file__, "--one", str(chips), "--steps",
                              str(args.steps), "--flavor", args.flavor, "--seq", str(args.seq)],
                             env=env, capture_output=True, text=True, check=False)
        if out.returncode:
            print(out.stderr[-3000:])
            raise SystemExit(f"{chips} chips failed")
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{r['chips']:>6} {r['ranks']:>6} {r['step_us']:>10.1f} {r['compute_us']:>11.1f} "
              f"{r['collective_us']:>14.1f} {r['bound']:>14} {time.perf_counter() - t:>8.1f}")


if __name__ == "__main__":
    main()
