"""Machine instructions per simulated instruction, counted by valgrind (not part of the tests).

    python benchmarks/bench_ir.py [--python PY ...] [--n 2048] [--what trace sched]

CPU seconds on a shared machine move by 15-50 % between runs of one build, which hides any
change smaller than that. Valgrind's callgrind counts the instructions the CPU executes (Ir)
instead: the same count every run, so two checkouts compare exactly, one change at a time.
For each interpreter given (`--python`, default this one; each imports its own trnsim) it
times one timing-only launch of the 2048^3 bf16 blocked matmul (`trace`: tracing the kernel)
and one scheduling of its program (`sched`: trnsim.timing.profile.time_program), after two
warm-up rounds outside the count, and prints Ir per simulated instruction. Ir is not time
(a cache miss costs more than an add) but for Python-bound work the two move together.

Counting runs ~50x slower than the program (about 30 s per measurement at 2048^3). Under
valgrind the 96 GiB HBM mapping of a trn2 chip cannot be made: the worker gives each launch a
4 GiB HBM instead (the timeline does not depend on the capacity). Skipped without valgrind.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def worker(n: int, what: str) -> None:
    """Warm up, wait for a line on stdin (the counting is switched on meanwhile), run once."""
    sys.path.insert(0, HERE)
    import ml_dtypes
    import numpy as np
    from kernels_for_timing import blocked_matmul

    import trnsim.allocation as allocation
    from trnsim.nki.jit import _as_kernel
    from trnsim.timing.profile import time_program

    make_hbm = allocation.HBM.__init__

    def small_hbm(self, capacity_bytes, *args, **kwargs):
        make_hbm(self, min(capacity_bytes, 4 << 30), *args, **kwargs)

    allocation.HBM.__init__ = small_hbm
    a = np.broadcast_to(np.zeros((), ml_dtypes.bfloat16), (n, n))
    kernel = _as_kernel(blocked_matmul)
    for _ in range(2):
        run = kernel.launch((a, a), {}, chip="trn2", values=False)
        time_program(run.program, run.chip, values=False)
    sys.stdout.write(f"READY {len(run.program)}\n")
    sys.stdout.flush()
    sys.stdin.readline()
    if what == "trace":
        kernel.launch((a, a), {}, chip="trn2", values=False)
    else:
        time_program(run.program, run.chip, values=False)
    sys.stdout.write("DONE\n")
    sys.stdout.flush()
    sys.stdin.readline()


def count(python: str, n: int, what: str) -> tuple[int, int]:
    """(Ir of the measured part, simulated instructions) under `python`."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        env = dict(os.environ, PYTHONHASHSEED="0", OPENBLAS_NUM_THREADS="1")
        env.pop("PYTHONPATH", None)
        cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
               f"--callgrind-out-file={out}", python, os.path.abspath(__file__), "--worker",
               "--n", str(n), "--what", what]
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd="/", env=env)
        ready = proc.stdout.readline().split()
        if not ready or ready[0] != "READY":
            proc.kill()
            raise RuntimeError(f"{python}: the worker did not start: {proc.stderr.read()[-2000:]}")
        control = ["callgrind_control", "-i"]
        subprocess.run([*control, "on", str(proc.pid)], capture_output=True, check=True)
        proc.stdin.write("\n")
        proc.stdin.flush()
        proc.stdout.readline()
        subprocess.run([*control, "off", str(proc.pid)], capture_output=True, check=True)
        proc.stdin.write("\n")
        proc.stdin.flush()
        err = proc.communicate()[1]
    found = re.search(r"refs:\s+([\d,]+)", err)
    if found is None:
        raise RuntimeError(f"{python}: no instruction count in valgrind's output")
    return int(found.group(1).replace(",", "")), int(ready[1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", nargs="*", default=[sys.executable])
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--what", nargs="*", default=["trace", "sched"], choices=["trace", "sched"])
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.n, args.what[0])
        return
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        print("skipped: valgrind (callgrind) is not installed")
        return
    for what in args.what:
        for python in args.python:
            ir, instr = count(python, args.n, what)
            print(f"{what:5s} {python}: {ir / instr:,.0f} Ir per simulated instruction "
                  f"({instr} instructions, bf16 blocked matmul {args.n}^3, timing only)",
                  flush=True)


if __name__ == "__main__":
    main()
