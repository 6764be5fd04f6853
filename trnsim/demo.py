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
