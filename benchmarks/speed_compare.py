"""Before/after of issue 17's table in one run: two checkouts' interpreters, interleaved.

    python benchmarks/speed_compare.py --before /path/to/old/.venv/bin/python \\
        [--after .venv/bin/python] [--rounds 3] [--quick]

Each round runs benchmarks/speed_table.py --json --runs 1 (one warm-up round, then one
measured round of every column) under the `before` interpreter, then under `after`; the
figures are medians over the rounds. Both runs see the same load, so the ratios are what
the comparison is about. Each interpreter imports the trnsim of its own checkout (an
editable install in its venv); the kernels and this script come from this checkout.
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


def one_round(python: str, quick: bool) -> list[dict]:
    cmd = [python, os.path.join(HERE, "speed_table.py"), "--json", "--runs", "1"]
    if quick:
        cmd.append("--quick")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd="/", env=env)
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def median(rows: list[dict], name: str, col: str) -> float:
    vals = [r[col] for r in rows if r["workload"] == name and not math.isnan(r[col])]
    return statistics.median(vals) if vals else math.nan


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True, help="python of the baseline checkout")
    ap.add_argument("--after", default=sys.executable)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    got: dict[str, list[dict]] = {"before": [], "after": []}
    for _ in range(args.rounds):
        for side in ("before", "after"):
            got[side] += one_round(getattr(args, side), args.quick)
    names = list(dict.fromkeys(r["workload"] for r in got["after"]))
    print(f"medians of {args.rounds} interleaved rounds (each: 1 warm-up + 1 run), CPU s")
    print("| workload | instr | timing-only before → after (instr/s) | values exact before → "
          "after (/numpy) | values fast (/numpy) | numpy before, after |")
    print("|---|---|---|---|---|---|")
    for name in names:
        b = {c: median(got["before"], name, c) for c in COLUMNS}
        a = {c: median(got["after"], name, c) for c in COLUMNS}
        n = next(r["instr"] for r in got["after"] if r["workload"] == name)
        print(
            f"| {name} | {n} | {b['timing-only']:.3f} → {a['timing-only']:.3f} s "
            f"({n / b['timing-only']:.0f} → {n / a['timing-only']:.0f}) | "
            f"{b['values exact']:.2f} → {a['values exact']:.2f} s "
            f"({b['values exact'] / b['numpy']:.2f}x → {a['values exact'] / a['numpy']:.2f}x) | "
            f"{a['values fast']:.2f} s ({a['values fast'] / a['numpy']:.2f}x) | "
            f"{b['numpy']:.2f}, {a['numpy']:.2f} s |",
            flush=True,
        )


if __name__ == "__main__":
    main()
