"""PyTorch device benchmark, measured side by side in one run (ratios, not absolute targets).

    python benchmarks/bench_torch.py [--quick]      (with trnsim installed: pip install -e .)

1. Per-op overhead in reference mode: tiny tensors (4x4) on the trn device vs CPU torch, in
   microseconds above CPU torch (target: <= 30 us).
2. The same ops on 1024x1024 tensors: device time / CPU time (target: <= 1.5x).
3. One training step of the decoder-only transformer block (trnsim.backend.models) in
   kernel mode: wall time, simulated device time, launches, and the busiest ops.

Both torch runs use one intra-op thread (torch.set_num_threads(1)) so the comparison is of
the same kernels; medians of alternating rounds of CPU time (time.process_time), so a loaded
machine skews the ratios less than wall time would.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F
import trnsim.backend
from trnsim.backend.models import TinyTransformer

import trnsim

DEV = trnsim.backend.runtime.name


def _pair_us(cpu, dev, reps: int, rounds: int = 7) -> tuple[float, float]:
    """Medians (us per call) of `cpu` and `dev`, timed in alternating rounds on this
    process's CPU clock (time.process_time: other processes' load does not count)."""
    for fn in (cpu, dev):
        for _ in range(max(3, reps // 10)):
            fn()
    out: dict = {cpu: [], dev: []}
    for _ in range(rounds):
        for fn in (cpu, dev):
            t = time.process_time()
            for _ in range(reps):
                fn()
            out[fn].append((time.process_time() - t) / reps * 1e6)
    return statistics.median(out[cpu]), statistics.median(out[dev])


OPS = {
    "add": lambda a, b: a + b,
    "mul_scalar": lambda a, b: a * 2.0,
    "relu": lambda a, b: torch.relu(a),
    "add_": lambda a, b: a.add_(b),
    "mm": lambda a, b: a @ b,
    "sum_dim": lambda a, b: a.sum(1),
    "softmax": lambda a, b: torch.softmax(a, -1),
    "gelu": lambda a, b: F.gelu(a),
    "where": lambda a, b: torch.where(a > 0, a, b),
}


def op_table(n: int, reps: int) -> list[tuple[str, float, float]]:
    rows = []
    a, b = torch.randn(n, n), torch.randn(n, n)
    ad, bd = a.to(DEV), b.to(DEV)
    for name, fn in OPS.items():
        if name == "mm" and n > 512:
            continue  # a 1024^3 fp32 matmul is compute: not what this table measures
        cpu, dev = _pair_us(lambda fn=fn: fn(a, b), lambda fn=fn: fn(ad, bd), reps)
        rows.append((name, cpu, dev))
    return rows


def transformer_step(seq: int) -> dict:
    torch.manual_seed(0)
    model = TinyTransformer(vocab=512, dim=128, heads=4, hidden=384, layers=2).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tokens = torch.randint(0, 512, (2, seq)).to(DEV)
    targets = torch.roll(tokens, -1, 1)

    def step():
        opt.zero_grad()
        loss = model(tokens, targets)
        loss.backward()
        opt.step()
        return loss

    step()  # warm-up: optimizer state, first-call costs
    t = time.perf_counter()
    with trnsim.profile_torch() as prof:
        step()
    wall = time.perf_counter() - t
    return {"wall_s": wall, "sim_us": prof.step_ns / 1000, "launches": len(prof.launches),
            "top": prof.table()[:6], "host": dict(prof.host_ops)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = p.parse_args()
    torch.set_num_threads(1)
    mod = getattr(torch, DEV)
    mod.set_mode("reference")
    reps = 300 if args.quick else 2000
    print(f"trnsim PyTorch device benchmark ({DEV}, {trnsim.backend.runtime.chip.name})")
    print("\n1. reference mode, 4x4 tensors: overhead above CPU torch (target <= 30 us)")
    print(f"   {'op':<12} {'cpu us':>9} {'trn us':>9} {'overhead us':>12}")
    for name, cpu, dev in op_table(4, reps):
        print(f"   {name:<12} {cpu:9.1f} {dev:9.1f} {dev - cpu:12.1f}")
    print("\n2. reference mode, 1024x1024 tensors: trn / cpu (target <= 1.5x)")
    print(f"   {'op':<12} {'cpu us':>9} {'trn us':>9} {'ratio':>7}")
    for name, cpu, dev in op_table(1024, 10 if args.quick else 30):
        print(f"   {name:<12} {cpu:9.1f} {dev:9.1f} {dev / cpu:7.2f}")
    mod.set_mode("kernel")
    seq = 64 if args.quick else 128
    r = transformer_step(seq)
    print(f"\n3. kernel mode: one AdamW training step of a 2-block transformer (dim 128, seq "
          f"{seq}, batch 2)")
    print(f"   wall {r['wall_s']:.1f} s, {r['launches']} kernel launches, simulated device "
          f"time {r['sim_us']:.1f} us")
    for row in r["top"]:
        print(f"     {row.op:<50} x{row.count:<4} {row.time_ns / 1000:9.1f} us "
              f"{100 * row.share:5.1f}%")
    if r["host"]:
        print(f"   ran on the host: {r['host']}")


if __name__ == "__main__":
    main()
