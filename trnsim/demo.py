"""`trnsim demo`: simulate two library kernels on a chip, check their values, write timelines."""

from __future__ import annotations

import os
import time

import ml_dtypes
import numpy as np


def _kernels() -> list[tuple[str, object, tuple[np.ndarray, ...], object]]:
    from trnsim.kernels import attention, matmul

    return [("matmul", matmul.matmul, matmul.matmul_ref),
            ("attention", attention.attention, attention.attention_ref)]


def demo_inputs(name: str, size: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    bf16 = ml_dtypes.bfloat16
    if name == "matmul":
        lhs_t = rng.standard_normal((size, size), dtype=np.float32).astype(bf16)
        rhs = rng.standard_normal((size, size), dtype=np.float32).astype(bf16)
        return lhs_t, rhs
    d = 128
    q = rng.standard_normal((d, size), dtype=np.float32).astype(bf16)
    k = rng.standard_normal((d, size), dtype=np.float32).astype(bf16)
    v = rng.standard_normal((size, d), dtype=np.float32).astype(bf16)
    return q, k, v


def run_demo(out_dir: str = "out", chip: str = "trn3", size: int = 2048) -> list[str]:
    """Profile a blocked bf16 matmul (size^3) and single-head attention (seq len = size, d=128)
    on `chip`; returns printable lines, writes <name>.pftrace, .png and .summary.json."""
    from trnsim import report
    from trnsim.timing.profile import profile

    os.makedirs(out_dir, exist_ok=True)
    lines = []
    for name, kernel, ref in _kernels():
        args = demo_inputs(name, size)
        t0 = time.perf_counter()
        prof = profile(kernel, *args, chip=chip)
        wall = time.perf_counter() - t0
        got = np.asarray(prof.outputs, dtype=np.float32)
        want = np.asarray(ref(*args), dtype=np.float32)
        err = float(np.max(np.abs(got - want)) / (np.max(np.abs(want)) or 1.0))
        base = os.path.join(out_dir, name)
        files = report.save(prof, base + ".pftrace", name, png=base + ".png")
        lines.append(report.format_summary(report.summary(prof, name)))
        lines.append(f"  values: max |error| / max |ref| = {err:.2e} (bf16 inputs, fp32 PSUM)")
        lines.append(f"  simulated {len(prof.program)} instructions in {wall:.1f} s wall time")
        lines.append("  wrote " + ", ".join(files.values()))
        lines.append("")
    return lines


def run_torch_demo(out_dir: str = "out", steps: int = 2) -> list[str]:
    """Train a small decoder-only transformer block on the trn device (kernel mode) next to the
    CPU; returns printable lines, writes torch_step.pftrace, .png and .summary.json."""
    try:
        import torch
    except ImportError:
        return ["torch step: skipped (torch is not installed: pip install torch==2.13.0)"]
    import trnsim
    import trnsim.backend
    from trnsim.backend.models import TinyTransformer

    dev = trnsim.backend.runtime.name
    torch.manual_seed(0)
    model = TinyTransformer(vocab=256, dim=128, heads=4, hidden=256)
    tokens = torch.randint(0, 256, (2, 128))
    targets = torch.roll(tokens, -1, 1)
    cpu, trn = model, TinyTransformer(vocab=256, dim=128, heads=4, hidden=256).to(dev)
    trn.load_state_dict(cpu.state_dict())
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-3) for m in (cpu, trn)]
    data = (tokens.to(dev), targets.to(dev))
    lines = ["torch: decoder block (dim 128, 4 heads, SwiGLU 256, seq 128, batch 2), AdamW, "
             f"on {dev} ({trnsim.backend.runtime.chip.name}) next to the CPU"]
    prof = None
    for step in range(steps):
        t0 = time.perf_counter()
        for m, opt, (x, y) in ((cpu, opts[0], (tokens, targets)), (trn, opts[1], data)):
            opt.zero_grad()
            if m is trn and step == steps - 1:
                with trnsim.profile_torch() as prof:
                    loss = m(x, y)
                    loss.backward()
                    opt.step()
            else:
                loss = m(x, y)
                loss.backward()
                opt.step()
            if m is cpu:
                cpu_loss = loss.item()
        wall = time.perf_counter() - t0
        lines.append(f"  step {step}: loss cpu {cpu_loss:.5f}  {dev} {loss.item():.5f}  "
                     f"({wall:.1f} s wall)")
    os.makedirs(out_dir, exist_ok=True)
    base = os.path.join(out_dir, "torch_step")
    files = prof.save(base + ".pftrace", png=base + ".png")
    lines.append(f"  one training step: {len(prof.launches)} kernel launches, simulated device "
                 f"time {prof.step_ns / 1000:.1f} us")
    for row in prof.table()[:5]:
        lines.append(f"    {row.op:<48} x{row.count:<4} {row.time_ns / 1000:9.1f} us "
                     f"{100 * row.share:5.1f}%  MFU {row.mfu:5.1f}%")
    lines.append("  wrote " + ", ".join(files.values()))
    return lines
