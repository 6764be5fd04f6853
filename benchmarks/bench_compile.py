"""torch.compile(backend="trn") benchmark: what compiling buys in simulated device time.

    PYTHONPATH=. python benchmarks/bench_compile.py [--quick]

1. The device workloads (trnsim.backend.models: the MLP, the CNN block, the transformer at the
   device tests' size and at bench_torch.py's size), one AdamW training step each: eager, the
   model compiled (optimizer step eager), and the model and `opt.step` both compiled.
   Simulated step time, kernel launches, ops run on the host (untimed), fused regions per
   pattern; each run's losses are checked against eager's (the step that is timed is the
   third, after compiling).
2. Each fusion pattern alone in a small model at tokens [2, 128], dim 128 (the README's
   table): the region's simulated time fused and as the eager ops it replaced, forward and
   backward, with launches, as trnsim.backend.compile_stats() reports them.

Times are the simulator's (kernel mode, the default chip), not wall clock. --quick skips the
transformer at bench_torch.py's size.
"""

from __future__ import annotations

import argparse
import math
from collections import Counter

import torch
import torch._dynamo
import torch.nn.functional as F
import trnsim.backend
from torch import nn
from trnsim.backend.compile import reset_compile_stats
from trnsim.backend.models import MLP, CNNBlock, TinyTransformer

import trnsim

DEV = trnsim.backend.runtime.name
STEPS = 3  # the first compiled step compiles (and times the regions): the last is timed


def workloads(quick: bool) -> dict:
    g = torch.Generator().manual_seed(0)
    tok16 = torch.randint(0, 64, (2, 16), generator=g)
    tok128 = torch.randint(0, 512, (2, 128), generator=g)
    ce = lambda m, x, y: F.cross_entropy(m(x), y)  # noqa: E731
    own = lambda m, x, y: m(x, y)  # noqa: E731
    out = {
        "mlp [32, 32]": (MLP, (torch.randn(32, 32, generator=g),
                               torch.randint(0, 10, (32,), generator=g)), ce),
        "cnn [4, 3, 8, 8]": (CNNBlock, (torch.randn(4, 3, 8, 8, generator=g),
                                        torch.randint(0, 10, (4,), generator=g)), ce),
        "transformer [2, 16] d32": (TinyTransformer, (tok16, torch.roll(tok16, -1, 1)), own),
    }
    if not quick:
        big = lambda: TinyTransformer(vocab=512, dim=128, heads=4, hidden=384, layers=2)  # noqa: E731
        out["transformer [2, 128] d128 x2"] = (big, (tok128, torch.roll(tok128, -1, 1)), own)
    return out


def train_step_profile(ctor, batch, loss_fn, how: str) -> dict:
    torch._dynamo.reset()
    reset_compile_stats()
    torch.manual_seed(0)
    model = ctor().to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    data = [t.to(DEV) for t in batch]
    fwd = torch.compile(model, backend=DEV) if how != "eager" else model
    step = torch.compile(opt.step, backend=DEV) if how == "model+step" else opt.step
    def one_step() -> float:
        opt.zero_grad()
        loss = loss_fn(fwd, *data)
        loss.backward()
        step()
        return loss.item()

    losses = [one_step() for _ in range(STEPS - 1)]
    with trnsim.profile_torch() as prof:
        losses.append(one_step())
    stats = trnsim.backend.compile_stats()
    return {"us": prof.step_ns / 1000, "launches": len(prof.launches), "losses": losses,
            "regions": Counter(r.pattern for r in stats.regions), "graphs": stats.compiles,
            "layout_copies": sum(stats.layout_copies.values()),
            "host": sum(prof.host_ops.values())}


class LinearGelu(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.fc = nn.Linear(d, 4 * d)

    def forward(self, x):
        return F.gelu(self.fc(x))


class GeluMLP(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.fc, self.proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))


class SwiGLU(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.gate, self.up = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, 3 * d, bias=False)
        self.down = nn.Linear(3 * d, d, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class CausalAttention(nn.Module):
    def __init__(self, d: int, heads: int = 4, seq: int = 128):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        mask = torch.full((seq, seq), float("-inf")).triu(1)
        self.register_buffer("causal", mask.view(1, 1, seq, seq))

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = (t.view(b, s, self.heads, -1).transpose(1, 2)
                   for t in self.qkv(x).split(d, dim=-1))
        att = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d // self.heads)
                            + self.causal[:, :, :s, :s], dim=-1)
        return (att @ v).transpose(1, 2).reshape(b, s, d)


class WrittenRMSNorm(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


class AddNorm(nn.Module):
    def __init__(self, d: int, norm: type):
        super().__init__()
        self.norm = norm(d)

    def forward(self, x):
        r = x * 0.5
        s = x + r
        return self.norm(s) + s


class Head(nn.Module):
    def __init__(self, d: int, vocab: int = 512):
        super().__init__()
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, x):
        logits = self.head(x).flatten(0, 1)
        targets = torch.arange(logits.shape[0], device=x.device) % logits.shape[1]
        return F.cross_entropy(logits, targets)


REGIONS = {
    "linear_act (gelu, bias)": lambda d: LinearGelu(d),
    "mlp (gelu tanh, hidden 4d)": lambda d: GeluMLP(d),
    "swiglu_mlp (hidden 3d)": lambda d: SwiGLU(d),
    "attention (4 heads, causal)": lambda d: CausalAttention(d),
    "rms_norm (written out)": lambda d: WrittenRMSNorm(d),
    "add_norm (rms)": lambda d: AddNorm(d, lambda n: nn.RMSNorm(n, eps=1e-5)),
    "add_norm (layer)": lambda d: AddNorm(d, nn.LayerNorm),
    "cross_entropy (512 classes)": lambda d: Head(d),
}


def region_rows(dim: int = 128) -> list:
    rows = []
    for name, ctor in REGIONS.items():
        torch._dynamo.reset()
        reset_compile_stats()
        torch.manual_seed(0)
        model = ctor(dim).to(DEV)
        x = torch.randn(2, 128, dim).to(DEV).requires_grad_()
        out = torch.compile(model, backend=DEV)(x)
        (out if out.dim() == 0 else out.square().mean()).backward()
        rows += [(name, r) for r in trnsim.backend.compile_stats().regions]
    return rows


def _us(v: float | None) -> str:
    return "      -" if v is None else f"{v / 1000:7.2f}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="skip the larger transformer")
    args = p.parse_args()
    print(f"torch.compile(backend={DEV!r}) on {trnsim.backend.runtime.chip.name}: simulated "
          f"device time of one AdamW training step (kernel mode)")
    print(f"  {'workload':<30} {'run':<11} {'step us':>9} {'launches':>9} {'vs eager':>9}  "
          f"graphs  host ops  fused regions")
    for name, (ctor, batch, loss_fn) in workloads(args.quick).items():
        eager = None
        for how in ("eager", "model", "model+step"):
            r = train_step_profile(ctor, batch, loss_fn, how)
            eager = eager or r
            same = max(abs(a - b) / abs(b) for a, b in zip(r["losses"], eager["losses"],
                                                          strict=True))
            regions = ", ".join(f"{k} x{v}" for k, v in sorted(r["regions"].items())) or "-"
            print(f"  {name:<30} {how:<11} {r['us']:9.2f} {r['launches']:9d} "
                  f"{eager['us'] / r['us']:8.2f}x  {r['graphs']:6d}  {r['host']:8d}  {regions}"
                  f"{'' if same <= 1e-5 else f'  (losses differ from eager: {same:.1e})'}")
    print("\nfused regions alone, tokens [2, 128], dim 128: fused vs the eager ops it replaced")
    print(f"  {'model':<28} {'region':<16} {'fused us':>8} {'eager us':>8} {'launches':>9} "
          f"{'bwd fused':>9} {'bwd eager':>9} {'launches':>9}")
    for name, r in region_rows():
        print(f"  {name:<28} {r.name:<16} {_us(r.fused_ns):>8} {_us(r.eager_ns):>8} "
              f"{r.fused_launches:4d}/{r.eager_launches:<4d} {_us(r.fused_backward_ns):>9} "
              f"{_us(r.eager_backward_ns):>9} {r.fused_backward_launches:4d}/"
              f"{r.eager_backward_launches:<4d}")


if __name__ == "__main__":
    main()
