"""Train a decoder-only transformer block (embedding, causal SDPA attention, RMS norm, SwiGLU
MLP, cross-entropy) on the simulated trn device next to the same run on the CPU.

    python examples/torch/train_transformer.py [--steps 5] [--mode kernel|reference] [--bf16]

Prints both runs' losses, the last step's simulated device time and per-op table, and writes
its timeline to out/train_transformer.pftrace and out/train_transformer.png.
"""

from __future__ import annotations

import argparse
import copy
import os

import torch
import trnsim.backend
from trnsim.backend.models import TinyTransformer

import trnsim

DEV = trnsim.backend.runtime.name


def step(model, opt, tokens, targets, bf16):
    opt.zero_grad()
    with torch.autocast(device_type=tokens.device.type, dtype=torch.bfloat16, enabled=bf16):
        loss = model(tokens, targets)
    loss.backward()
    opt.step()
    return loss


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--mode", choices=["kernel", "reference"], default="kernel")
    p.add_argument("--bf16", action="store_true", help="torch.autocast with bfloat16")
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--out", default="out")
    args = p.parse_args()
    getattr(torch, DEV).set_mode(args.mode)

    torch.manual_seed(0)
    cpu_model = TinyTransformer(vocab=512, dim=128, heads=4, hidden=384, layers=2)
    dev_model = copy.deepcopy(cpu_model).to(DEV)
    tokens = torch.randint(0, 512, (2, args.seq))
    targets = torch.roll(tokens, -1, 1)
    dt, dy = tokens.to(DEV), targets.to(DEV)
    cpu_opt = torch.optim.AdamW(cpu_model.parameters(), lr=1e-3)
    dev_opt = torch.optim.AdamW(dev_model.parameters(), lr=1e-3)
    print(f"transformer (2 blocks, dim 128) on {DEV} ({trnsim.backend.runtime.chip.name}, "
          f"{args.mode} mode) vs cpu")
    for i in range(args.steps):
        cpu_loss = step(cpu_model, cpu_opt, tokens, targets, args.bf16).item()
        if i == args.steps - 1:
            with trnsim.profile_torch() as prof:
                dev_loss = step(dev_model, dev_opt, dt, dy, args.bf16).item()
        else:
            dev_loss = step(dev_model, dev_opt, dt, dy, args.bf16).item()
        print(f"step {i}: loss cpu {cpu_loss:.6f}  {DEV} {dev_loss:.6f}  "
              f"diff {abs(cpu_loss - dev_loss):.2e}")
    print(prof.report())
    if prof.launches:
        os.makedirs(args.out, exist_ok=True)
        base = os.path.join(args.out, "train_transformer")
        files = prof.save(base + ".pftrace", png=base + ".png")
        print("wrote " + ", ".join(files.values()))


if __name__ == "__main__":
    main()
