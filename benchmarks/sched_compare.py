"""The scheduler alone, before/after in one run: two checkouts side by side, run by run.

    python benchmarks/sched_compare.py --before /path/to/old/venv/bin/python \\
        [--after venv/bin/python] [--runs 7] [--quick]

One worker process per checkout (this file with --serve, under that checkout's interpreter,
so each imports its own trnsim; the kernels come from this checkout). Each worker records the
programs of bench_timing.py's workloads once (timing only), then times
`trnsim.timing.profile.time_program` on them when asked (scheduling, compiler's order, the
Profile; not tracing). Per workload: two warm-up runs each, then `--runs` runs alternating
before/after, so both sides see the same load; figures are medians of CPU seconds. The last
three rows (column blocks at N, 2N, 4N instructions) give each side's growth ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _programs(quick: bool) -> list[tuple[str, object]]:
    """(name, traced run) of each workload, traced in this process (values=False)."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    sys.path.insert(0, HERE)
    from kernels_for_timing import traced_workload

    n = 1024 if quick else 2048
    out = [
        (f"blocked matmul {n}^3", traced_workload("matmul", quick)),
        ("elementwise chain", traced_workload("elementwise", quick)),
        (f"Beta-1 blocked matmul {n}^3", traced_workload("b1", quick)),
        ("compute-only chain", traced_workload("compute", quick)),
    ]
    for m in (1, 2, 4):
        out.append((f"column blocks x{m}", traced_workload("columns", quick, m)))
    return out


def serve(quick: bool) -> None:
    from trnsim.timing.profile import time_program

    runs = _programs(quick)
    hello = {"workloads": [name for name, _ in runs], "instr": [len(r.program) for _, r in runs]}
    sys.stdout.write(json.dumps(hello) + "\n")
    sys.stdout.flush()
    for line in sys.stdin:
        run = runs[int(line)][1]
        t0 = time.process_time()
        time_program(run.program, run.chip, values=False)
        sys.stdout.write(json.dumps({"seconds": time.process_time() - t0}) + "\n")
        sys.stdout.flush()


class Worker:
    def __init__(self, python: str, quick: bool):
        cmd = [python, os.path.abspath(__file__), "--serve"] + (["--quick"] * quick)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env.setdefault("OPENBLAS_NUM_THREADS", "1")
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd="/", env=env
        )
        hello = json.loads(self.proc.stdout.readline())
        self.workloads, self.instr = hello["workloads"], hello["instr"]

    def run(self, i: int) -> float:
        self.proc.stdin.write(f"{i}\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())["seconds"]

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def compare(before: str, after: str, runs: int, quick: bool) -> None:
    workers = [Worker(before, quick), Worker(after, quick)]
    names, instr = workers[0].workloads, workers[0].instr
    if workers[1].instr != instr:
        print(f"note: instruction counts differ: {instr} vs {workers[1].instr}")
    print("| workload (trn2) | instructions | before instr/s | after instr/s | after / before |")
    print("|---|---|---|---|---|")
    per = [[], []]  # us per instruction, per side
    for i, name in enumerate(names):
        for w in workers:
            w.run(i), w.run(i)
        times = [[], []]
        for _ in range(runs):
            for side, w in enumerate(workers):
                times[side].append(w.run(i))
        med = [statistics.median(t) for t in times]
        for side in (0, 1):
            per[side].append(1e6 * med[side] / instr[i])
        print(
            f"| {name} | {instr[i]} | {instr[i] / med[0]:,.0f} | {instr[i] / med[1]:,.0f} "
            f"| {med[0] / med[1]:.2f}x |",
            flush=True,
        )
    for side, label in ((0, "before"), (1, "after")):
        col = per[side][-3:]
        print(
            f"column blocks, us per instruction at N, 2N, 4N ({label}): "
            + ", ".join(f"{v:.1f}" for v in col)
            + f"; ratios {col[1] / col[0]:.2f}, {col[2] / col[0]:.2f}"
        )
    for w in workers:
        w.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", help="the old checkout's Python")
    ap.add_argument("--after", default=sys.executable)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="smaller workloads")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(args.quick)
        return
    if not args.before:
        ap.error("--before is required")
    compare(args.before, args.after, args.runs, args.quick)


if __name__ == "__main__":
    main()
