"""Train a small decoder-only transformer eagerly and with torch.compile(backend="trn") on the
simulated device, and compare their simulated step times.

    python examples/torch/compile_transformer.py [--steps 3] [--dim 128] [--seq 128]
    trnsim diff out/compile_eager.pftrace out/compile_compiled.pftrace

The model is written the way such models often are (RMS norm spelled out, attention as
softmax(q k^T / sqrt(d) + causal mask) v, a SwiGLU MLP, cross-entropy), so the fusion pass
finds its patterns. Prints both runs' losses, each step's simulated device time, the fused
regions (each fused vs its eager ops) and the per-op diff, and writes both timelines to out/.
"""

from __future__ import annotations

import argparse
import copy
import math
import os

import torch
import torch.nn.functional as F
import trnsim.backend
from torch import nn

import trnsim
from trnsim import report

DEV = trnsim.backend.runtime.name  # "trn", or "neuron" under TRNSIM_DEVICE=neuron


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, hidden: int, seq: int):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = RMSNorm(dim), RMSNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.proj = nn.Linear(dim, dim, bias=False)
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)
        mask = torch.full((seq, seq), float("-inf")).triu(1)
        self.register_buffer("causal", mask.view(1, 1, seq, seq))

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(d, dim=-1)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // self.heads)
        att = torch.softmax(scores + self.causal[:, :, :s, :s], dim=-1) @ v
        x = x + self.proj(att.transpose(1, 2).reshape(b, s, d))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Transformer(nn.Module):
    def __init__(self, vocab: int, dim: int, heads: int, hidden: int, layers: int, seq: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim, heads, hidden, seq) for _ in range(layers))
        self.norm = RMSNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens, targets):
        x = self.embed(tokens)
        for blk in self.blocks:
            x = blk(x)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def step(model, opt, tokens, targets):
    opt.zero_grad()
    loss = model(tokens, targets)
    loss.backward()
    opt.step()
    return loss.item()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=3, help="training steps of each run")
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--vocab", type=int, default=512)
    p.add_argument("--out", default="out")
    p.add_argument("--no-png", action="store_true", help="write the timelines only")
    args = p.parse_args()

    torch.manual_seed(0)
    cpu_model = Transformer(args.vocab, args.dim, args.heads, 3 * args.dim, args.layers,
                            args.seq)
    tokens = torch.randint(0, args.vocab, (2, args.seq))
    data = (tokens.to(DEV), torch.roll(tokens, -1, 1).to(DEV))
    runs = {}
    for name in ("eager", "compiled"):
        model = copy.deepcopy(cpu_model).to(DEV)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        fwd = torch.compile(model, backend=DEV) if name == "compiled" else model
        losses = []
        for i in range(args.steps):
            if i == args.steps - 1:  # the first compiled step also compiled: time the last
                with trnsim.profile_torch() as prof:
                    losses.append(step(fwd, opt, *data))
            else:
                losses.append(step(fwd, opt, *data))
        runs[name] = (losses, prof)
    print(f"transformer ({args.layers} blocks, dim {args.dim}, seq {args.seq}) on {DEV} "
          f"({trnsim.backend.runtime.chip.name}): eager vs torch.compile(backend={DEV!r})")
    for i, (a, b) in enumerate(zip(runs["eager"][0], runs["compiled"][0], strict=True)):
        print(f"step {i}: loss eager {a:.6f}  compiled {b:.6f}  diff {abs(a - b):.2e}")
    eager, compiled = runs["eager"][1], runs["compiled"][1]
    print(f"simulated step time: eager {eager.step_ns / 1000:.2f} us ({len(eager.launches)} "
          f"launches), compiled {compiled.step_ns / 1000:.2f} us ({len(compiled.launches)} "
          f"launches): {eager.step_ns / compiled.step_ns:.2f}x")
    print(trnsim.backend.compile_stats().report())
    os.makedirs(args.out, exist_ok=True)
    paths = {}
    for name, prof in (("eager", eager), ("compiled", compiled)):
        base = os.path.join(args.out, f"compile_{name}")
        png = None if args.no_png else base + ".png"
        paths[name] = prof.save(base + ".pftrace", png=png)["trace"]
    print(report.diff_steps(eager.summary(), compiled.summary()))
    print(f"wrote {paths['eager']} and {paths['compiled']} (trnsim diff {paths['eager']} "
          f"{paths['compiled']})")


if __name__ == "__main__":
    main()
