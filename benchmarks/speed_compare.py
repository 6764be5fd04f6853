"""Before/after of issue 17's table in one run: two checkouts side by side, run by run.

    python benchmarks/speed_compare.py --before /path/to/old/.venv/bin/python \\
        [--after .venv/bin/python] [--runs 3] [--quick]

One worker process per checkout (benchmarks/speed_table.py --serve, under that checkout's
interpreter, so each imports its own trnsim; the kernels and inputs come from this checkout).
Every measurement is asked of both workers in turn: per workload and column, one warm-up
run each, then `--runs` runs alternating before/after, so both sides see the same load;
figures are medians of CPU seconds.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
COLUMNS = ("timing-only", "values exact", "values fast", "numpy")


class Worker:
    def __init__(self, python: str, quick: bool):
        cmd = [python, os.path.join(HERE, "speed_table.py"), "--serve"] + (["--quick"] * quick)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env.setdefault("OPENBLAS_NUM_THREADS", "1")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, cwd="/", env=env)
        hello = json.loads(self.proc.stdout.readline())
        self.workloads, self.instr, self.fast = hello["workloads"], hello["instr"], hello["fast"]

    def run(self, i: int, col: str) -> float:
        self.proc.stdin.write(f"{i} {col}\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())["seconds"]

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True, help="python of the baseline checkout")
    ap.add_argument("--after", default=sys.executable)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    sides = {"before": Worker(args.before, args.quick), "after": Worker(args.after, args.quick)}
    print(f"medians of {args.runs} runs after 1 warm-up, before/after alternating, CPU s")
    print("| workload | instr/s timing-only, before → after | values exact, before → after "
          "(× numpy) | values fast (× numpy) | numpy tile loop |")
    print("|---|---|---|---|---|")
    for i, name in enumerate(sides["after"].workloads):
        t = {}
        for col in COLUMNS:
            for side, w in sides.items():
                if col == "values fast" and not w.fast:
                    t[side, col] = math.nan
                    continue
                t[side, col] = []
            for rnd in range(args.runs + 1):
                for side, w in sides.items():
                    if isinstance(t[side, col], list):
                        s = w.run(i, col)
                        if rnd:
                            t[side, col].append(s)
            for side in sides:
                if isinstance(t[side, col], list):
                    t[side, col] = statistics.median(t[side, col])
        numpy = statistics.median([t["before", "numpy"], t["after", "numpy"]])
        n = sides["after"].instr[i]
        print(
            f"| {name} | {n / t['before', 'timing-only']:.0f} → "
            f"{n / t['after', 'timing-only']:.0f} "
            f"({t['before', 'timing-only']:.3f} → {t['after', 'timing-only']:.3f} s) | "
            f"{t['before', 'values exact']:.2f} → {t['after', 'values exact']:.2f} s "
            f"({t['before', 'values exact'] / numpy:.2f}× → "
            f"{t['after', 'values exact'] / numpy:.2f}×) | "
            f"{t['after', 'values fast']:.2f} s ({t['after', 'values fast'] / numpy:.2f}×) | "
            f"{numpy:.2f} s |",
            flush=True,
        )
    for w in sides.values():
        w.close()


if __name__ == "__main__":
    main()
