"""Where the scheduler's time goes: per-phase and per-module shares of `time_program`.

    PYTHONPATH=. python benchmarks/profile_scheduler.py [--workload matmul] [--runs 5] [--top 25]

Records a bench_timing.py workload once (timing only, trn2), warms up, then times the phases of
`trnsim.timing.profile.time_program` by hand (process CPU time, best of `--runs`): preparation
(compiler rules, statics, dependency tracker), the ASAP pass, the compiler's order, reorder (the
order rules), the event loop and the Profile. Then one run under cProfile, summed by module
(own time) and the `--top` functions by own time.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))


def _workload(name: str):
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    sys.path.insert(0, HERE)
    from kernels_for_timing import traced_workload

    return traced_workload(name)


def _phases(program, chip) -> dict[str, float]:
    """CPU seconds of each phase of one time_program (reorder on, default rules)."""
    from trnsim.gcpause import gc_paused
    from trnsim.timing.profile import Profile
    from trnsim.timing.reorder import asap_ticks, compiler_order
    from trnsim.timing.scheduler import Scheduler

    out: dict[str, float] = {}
    clock = time.process_time
    with gc_paused():
        t0 = clock()
        planner = Scheduler(chip)
        planner.prepare(program, full_deps=True)
        t1 = clock()
        asap = asap_ticks(planner)
        t2 = clock()
        order = compiler_order(program, planner.order_deps, asap, planner.prepared.queue)
        t3 = clock()
        planner.reorder(order)
        t4 = clock()
        tl = planner.run_prepared(program)
        t5 = clock()
        Profile(program, tl, chip, None, False)
        t6 = clock()
    out["prepare (rules, statics, deps)"] = t1 - t0
    out["asap_ticks"] = t2 - t1
    out["compiler_order"] = t3 - t2
    out["reorder (order rules)"] = t4 - t3
    out["event loop (_execute)"] = t5 - t4
    out["Profile"] = t6 - t5
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", default="matmul",
                    choices=["matmul", "elementwise", "b1", "compute", "columns"])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    from trnsim.timing.profile import time_program

    run = _workload(args.workload)
    program, chip = run.program, run.chip
    n = len(program)
    t0 = time.process_time()
    time_program(program, chip, values=False)
    print(f"first time_program (one-time costs incl. any JIT load): "
          f"{1e3 * (time.process_time() - t0):.1f} ms")
    for _ in range(2):
        time_program(program, chip, values=False)
    best: dict[str, float] = {}
    for _ in range(args.runs):
        for k, v in _phases(program, chip).items():
            best[k] = min(best.get(k, v), v)
    total = sum(best.values())
    print(f"{args.workload}: {n} instructions, phases (best of {args.runs}, CPU ms):")
    for k, v in best.items():
        print(f"  {k:32s} {1e3 * v:8.2f} ms  {100 * v / total:5.1f} %  {1e6 * v / n:6.2f} us/instr")
    print(f"  {'total':32s} {1e3 * total:8.2f} ms          {n / total:,.0f} instr/s")

    prof = cProfile.Profile()
    prof.enable()
    time_program(program, chip, values=False)
    prof.disable()
    st = pstats.Stats(prof)
    by_mod: dict[str, float] = defaultdict(float)
    calls = 0
    rows = []
    for (file, line, func), (_cc, nc, tt, _ct, _callers) in st.stats.items():
        mod = file.split("trnsim/")[-1] if "trnsim/" in file else (
            "builtins" if file == "~" else os.path.basename(file))
        by_mod[mod] += tt
        calls += nc
        rows.append((tt, nc, f"{mod}:{line}({func})"))
    tot = sum(by_mod.values())
    print(f"cProfile: {1e3 * tot:.1f} ms, {calls / n:.1f} calls per instruction; "
          "own time by module:")
    for mod, tt in sorted(by_mod.items(), key=lambda kv: -kv[1])[:15]:
        print(f"  {mod:40s} {100 * tt / tot:5.1f} %")
    print(f"top {args.top} functions by own time:")
    for tt, nc, name in sorted(rows, reverse=True)[: args.top]:
        print(f"  {100 * tt / tot:5.1f} %  {nc:7d}  {name}")


if __name__ == "__main__":
    main()
