"""Train an MLP on the simulated trn device next to the same run on the CPU.

    python examples/torch/train_mlp.py [--steps 5] [--mode kernel|reference] [--bf16]

Prints both runs' losses per step, the simulated device time of the last step and its busiest
ops, and writes that step's timeline to out/train_mlp.pftrace (open it in ui.perfetto.dev)
and out/train_mlp.png.
"""

from __future__ import annotations

import argparse
import copy
import os

import torch
import torch.nn.functional as F
import trnsim.backend
from trnsim.backend.models import MLP

import trnsim

DEV = trnsim.backend.runtime.name


def step(model, opt, x, y, bf16):
    opt.zero_grad()
    with torch.autocast(device_type=x.device.type, dtype=torch.bfloat16, enabled=bf16):
        loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--mode", choices=["kernel", "reference"], default="kernel")
    p.add_argument("--bf16", action="store_true", help="torch.autocast with bfloat16")
    p.add_argument("--out", default="out")
    args = p.parse_args()
    getattr(torch, DEV).set_mode(args.mode)

    torch.manual_seed(0)
    cpu_model = MLP(d_in=64, hidden=256, classes=10)
    dev_model = copy.deepcopy(cpu_model).to(DEV)
    x, y = torch.randn(128, 64), torch.randint(0, 10, (128,))
    xd, yd = x.to(DEV), y.to(DEV)
    cpu_opt = torch.optim.AdamW(cpu_model.parameters(), lr=1e-3)
    dev_opt = torch.optim.AdamW(dev_model.parameters(), lr=1e-3)
    print(f"MLP on {DEV} ({trnsim.backend.runtime.chip.name}, {args.mode} mode) vs cpu")
    for i in range(args.steps):
        cpu_loss = step(cpu_model, cpu_opt, x, y, args.bf16).item()
        if i == args.steps - 1:
            with trnsim.profile_torch() as prof:
                dev_loss = step(dev_model, dev_opt, xd, yd, args.bf16).item()
        else:
            dev_loss = step(dev_model, dev_opt, xd, yd, args.bf16).item()
        print(f"step {i}: loss cpu {cpu_loss:.6f}  {DEV} {dev_loss:.6f}  "
              f"diff {abs(cpu_loss - dev_loss):.2e}")
    print(prof.report())
    if prof.launches:
        os.makedirs(args.out, exist_ok=True)
        base = os.path.join(args.out, "train_mlp")
        files = prof.save(base + ".pftrace", png=base + ".png")
        print("wrote " + ", ".join(files.values()))


if __name__ == "__main__":
    main()
