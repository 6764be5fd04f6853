"""Issue 17's speed table, measured side by side in one run (not part of the test suite).

    PYTHONPATH=. python benchmarks/bench_timing.py --table [--quick]
    PYTHONPATH=. python benchmarks/speed_table.py [--quick] [--runs 3]

For each workload: trnsim timing-only (values=False: tracing + scheduling), trnsim
values+timing in the default exact numerics and in `numerics="fast"`, and numpy doing the same
tile arithmetic (the 128x128x512 fp32 tile loop of a blocked matmul; numpy's row softmax over
128-row blocks). The runs are interleaved (one round runs every column once), 1 warm-up round
then `--runs` rounds, and each figure is the median of its column: on a shared machine the
ratios in one run mean more than the seconds. CPU seconds (process time); BLAS on one thread.
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import os
import statistics
import sys
import time

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before numpy loads its BLAS

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from kernels_for_timing import TILE_K, TILE_M, TILE_N, blocked_matmul  # noqa: E402
from trnsim.kernels.softmax import softmax  # noqa: E402

from trnsim.nki import runner  # noqa: E402
from trnsim.nki.jit import _as_kernel  # noqa: E402
from trnsim.timing.profile import time_program  # noqa: E402

BF16 = ml_dtypes.bfloat16


def cpu_seconds(fn) -> float:
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def simulate(kernel, args, values: bool, numerics: str = "exact"):
    """Trace (with or without values) and schedule one launch; returns the traced run."""
    kw = {} if numerics == "exact" else {"numerics": numerics}
    run = _as_kernel(kernel).launch(args, {}, chip="trn2", values=values, **kw)
    time_program(run.program, run.chip, values=values)
    return run


def numpy_matmul_tiles(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The blocked matmul's tile arithmetic in numpy: fp32 128x128x512 tiles, fp32 sums."""
    k_dim, m_dim = a.shape
    n_dim = b.shape[1]
    out = np.empty((m_dim, n_dim), np.float32)
    for m in range(m_dim // TILE_M):
        a_blk = [
            a[k * TILE_K : (k + 1) * TILE_K, m * TILE_M : (m + 1) * TILE_M].astype(np.float32)
            for k in range(k_dim // TILE_K)
        ]
        for n in range(n_dim // TILE_N):
            acc = np.zeros((TILE_M, TILE_N), np.float32)
            for k in range(k_dim // TILE_K):
                bt = b[k * TILE_K : (k + 1) * TILE_K, n * TILE_N : (n + 1) * TILE_N]
                acc += a_blk[k].T @ bt.astype(np.float32)
            out[m * TILE_M : (m + 1) * TILE_M, n * TILE_N : (n + 1) * TILE_N] = acc
    return out


def numpy_softmax_rows(x: np.ndarray) -> np.ndarray:
    """Row softmax in numpy over 128-row blocks (fp32)."""
    out = np.empty_like(x)
    for r in range(0, x.shape[0], 128):
        blk = x[r : r + 128]
        e = np.exp(blk - blk.max(axis=1, keepdims=True))
        out[r : r + 128] = e / e.sum(axis=1, keepdims=True)
    return out


def workloads(quick: bool) -> list[tuple[str, object, tuple, object]]:
    rng = np.random.default_rng(0)
    sizes = (1024, 2048) if quick else (2048, 4096)
    cases = []
    for n in sizes:
        a = rng.standard_normal((n, n)).astype(BF16)
        b = rng.standard_normal((n, n)).astype(BF16)
        cases.append((f"bf16 blocked matmul {n}^3", blocked_matmul, (a, b), numpy_matmul_tiles))
    n = sizes[-1]
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    cases.append((f"fp32 blocked matmul {n}^3", blocked_matmul, (a, b), numpy_matmul_tiles))
    x = rng.standard_normal((n, n)).astype(np.float32)
    cases.append((f"row softmax {n}^2 fp32", softmax, (x,), numpy_softmax_rows))
    return cases


COLUMNS = ("timing-only", "values exact", "values fast", "numpy")


def column_fns(kernel, args, floor) -> dict:
    zeros = tuple(np.broadcast_to(np.zeros((), a.dtype), a.shape) for a in args)
    return {
        "timing-only": lambda: simulate(kernel, zeros, False),
        "values exact": lambda: simulate(kernel, args, True),
        "values fast": lambda: simulate(kernel, args, True, "fast"),
        "numpy": lambda: floor(*args),
    }


def has_fast() -> bool:
    return "numerics" in inspect.signature(runner.run_kernel).parameters


def measure(kernel, args, floor, runs: int) -> dict[str, float]:
    """Median CPU seconds per column over `runs` interleaved rounds, after one warm-up."""
    fns = column_fns(kernel, args, floor)
    has_fast = globals()["has_fast"]()
    columns = [c for c in COLUMNS if has_fast or c != "values fast"]
    times: dict[str, list[float]] = {c: [] for c in COLUMNS}
    for rnd in range(runs + 1):
        for c in columns:
            t = cpu_seconds(fns[c])
            if rnd:
                times[c].append(t)
    return {c: statistics.median(v) if v else math.nan for c, v in times.items()}


def instr_count(kernel, args) -> int:
    zeros = tuple(np.broadcast_to(np.zeros((), a.dtype), a.shape) for a in args)
    return len(_as_kernel(kernel).launch(zeros, {}, chip="trn2", values=False).program)


def table(quick: bool = False, runs: int = 3) -> None:
    print(f"\n== issue 17 table: medians of {runs} interleaved runs after 1 warm-up, CPU s ==")
    ratios = " | exact/numpy | fast/numpy | timing-only instr/s |"
    head = "| workload | instr | " + " | ".join(COLUMNS) + ratios
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for name, kernel, args, floor in workloads(quick):
        t = measure(kernel, args, floor, runs)
        n = instr_count(kernel, args)
        cells = " | ".join(f"{t[c]:.3f}" for c in COLUMNS)
        print(
            f"| {name} | {n} | {cells} | {t['values exact'] / t['numpy']:.2f}x | "
            f"{t['values fast'] / t['numpy']:.2f}x | {n / t['timing-only']:.0f} |",
            flush=True,
        )


def as_json(quick: bool, runs: int) -> None:
    """One JSON line per workload: its instruction count and median CPU s per column."""
    for name, kernel, args, floor in workloads(quick):
        t = measure(kernel, args, floor, runs)
        print(json.dumps({"workload": name, "instr": instr_count(kernel, args), **t}),
              flush=True)


def serve(quick: bool) -> None:
    """Answer lines "<workload index> <column>" on stdin with the CPU seconds of one run, as
    JSON on stdout (benchmarks/speed_compare.py drives two of these side by side)."""
    work = workloads(quick)
    cases = [column_fns(k, a, f) for _, k, a, f in work]
    hello = {"workloads": [w[0] for w in work], "instr": [instr_count(k, a) for _, k, a, _ in work],
             "fast": has_fast()}
    print(json.dumps(hello), flush=True)
    for line in sys.stdin:
        i, col = line.strip().split(" ", 1)
        print(json.dumps({"seconds": cpu_seconds(cases[int(i)][col])}), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller sizes")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", action="store_true", help="JSON lines, one per workload")
    ap.add_argument("--serve", action="store_true", help="run on request (speed_compare.py)")
    args = ap.parse_args()
    if args.serve:
        serve(args.quick)
    elif args.json:
        as_json(args.quick, args.runs)
    else:
        table(args.quick, args.runs)


if __name__ == "__main__":
    main()
