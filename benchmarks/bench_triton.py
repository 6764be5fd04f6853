"""trnsim against Triton's interpreter on the same blocked GEMM, with values (issue 17).

    PYTHONPATH=. python benchmarks/bench_triton.py [--sizes 1024,2048] [--runs 3]
        [--triton-python /path/to/venv/bin/python]

Both sides compute out[M, N] = a_t.T @ b with 128 x 128 x 512 tiles (K x M x N) and fp32
accumulation: trnsim runs benchmarks/kernels_for_timing.blocked_matmul with values and timing
(default exact numerics, and numerics="fast"); Triton runs an equivalent kernel written here
under TRITON_INTERPRET=1 (its CPU interpreter, numpy underneath), one program per output tile,
the K loop inside. Triton is measured in a child process of `--triton-python` (default: this
interpreter), so it can live in its own venv (`python -m venv --system-site-packages V &&
V/bin/pip install triton`); when that interpreter has no triton the Triton column is skipped.
Rounds are interleaved (one round runs every column once): 1 warm-up, then `--runs`; CPU
seconds (process time, the child's own for Triton), medians; BLAS on one thread. bf16 inputs:
the interpreter's tl.dot on bf16 operands gives wrong values in triton 3.9 on CPU, so the
Triton kernel widens its bf16 tiles to fp32 before tl.dot (what the tensor engine does too).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before numpy loads its BLAS

HERE = os.path.dirname(os.path.abspath(__file__))

TRITON_WORKER = r'''
import os, sys, json, time
os.environ["TRITON_INTERPRET"] = "1"
try:
    import torch
    import triton
    import triton.language as tl
except ImportError as e:
    print(json.dumps({"skip": f"no triton in {sys.executable}: {e}"}))
    sys.exit(0)
torch.set_num_threads(1)


@triton.jit
def gemm(a_t, b, out, M, N, K, BK: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a_t + (k + rk)[None, :] * M + rm[:, None])   # [BM, BK] of a_t's columns
        y = tl.load(b + (k + rk)[:, None] * N + rn[None, :])     # [BK, BN]
        acc += tl.dot(x.to(tl.float32), y.to(tl.float32))
    tl.store(out + rm[:, None] * N + rn[None, :], acc)


n, dtype, runs = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
g = torch.Generator().manual_seed(0)
tdt = {"bf16": torch.bfloat16, "fp32": torch.float32}[dtype]
a_t = torch.randn(n, n, generator=g).to(tdt)
b = torch.randn(n, n, generator=g).to(tdt)
out = torch.empty(n, n)
grid = (n // 128, n // 512)
times = []
for r in range(runs + 1):
    t0 = time.process_time()
    gemm[grid](a_t, b, out, n, n, n, 128, 128, 512)
    if r:
        times.append(time.process_time() - t0)
ref = a_t.double().T @ b.double()
err = float(((out.double() - ref).abs().max() / ref.abs().max()).item())
print(json.dumps({"times": times, "rel_err": err}))
'''


def triton_times(python: str, n: int, dtype: str, runs: int) -> dict:
    """CPU seconds of the Triton GEMM per run, from a child `python` (or why it was skipped)."""
    try:
        proc = subprocess.run([python, "-c", TRITON_WORKER, str(n), dtype, str(runs)],
                              capture_output=True, text=True, check=False)
    except OSError as e:
        return {"skip": f"cannot run {python}: {e}"}
    if proc.returncode != 0:
        last = proc.stderr.strip().splitlines()[-1:] or [f"exit code {proc.returncode}"]
        return {"skip": f"the Triton worker failed: {last[0]}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def trnsim_times(n: int, dtype: str, runs: int) -> dict[str, list[float]]:
    """CPU seconds per run of trnsim values+timing, exact and fast, interleaved."""
    import ml_dtypes
    import numpy as np

    sys.path.insert(0, HERE)
    from kernels_for_timing import blocked_matmul
    from speed_table import cpu_seconds, simulate

    rng = np.random.default_rng(0)
    np_dt = {"bf16": ml_dtypes.bfloat16, "fp32": np.float32}[dtype]
    args = (rng.standard_normal((n, n)).astype(np_dt), rng.standard_normal((n, n)).astype(np_dt))
    times: dict[str, list[float]] = {"exact": [], "fast": []}
    for r in range(runs + 1):
        for mode in times:
            t = cpu_seconds(lambda m=mode: simulate(blocked_matmul, args, True, m))
            if r:
                times[mode].append(t)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1024,2048")
    ap.add_argument("--dtypes", default="bf16")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--triton-python", default=sys.executable)
    args = ap.parse_args()
    print(f"blocked GEMM n^3, 128x128x512 tiles; medians of {args.runs} runs after 1 warm-up, "
          "CPU s; ratio = Triton interpreter / trnsim "
          "(issue 17 targets: >= 20x exact, >= 30x fast)")
    print(f"{'workload':<22}{'trnsim exact':>14}{'trnsim fast':>13}{'Triton interp':>15}"
          f"{'ratio exact':>13}{'ratio fast':>12}")
    for dtype in args.dtypes.split(","):
        for n in map(int, args.sizes.split(",")):
            t_sim = trnsim_times(n, dtype, args.runs)
            t_tri = triton_times(args.triton_python, n, dtype, args.runs)
            exact, fast = (statistics.median(t_sim[m]) for m in ("exact", "fast"))
            name = f"{dtype} {n}^3"
            if "skip" in t_tri:
                print(f"{name:<22}{exact:>14.3f}{fast:>13.3f}   Triton skipped: {t_tri['skip']}")
                continue
            tri = statistics.median(t_tri["times"])
            print(f"{name:<22}{exact:>14.3f}{fast:>13.3f}{tri:>15.3f}{tri / exact:>12.1f}x"
                  f"{tri / fast:>11.1f}x   (Triton max rel err {t_tri['rel_err']:.1e})")
    sys.stdout.flush()


if __name__ == "__main__":
    t0 = time.time()
    main()
    print(f"wall {time.time() - t0:.0f} s")
