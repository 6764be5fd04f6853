"""Timing-model benchmarks (not part of the test suite). Prints ratios measured in this run.

    PYTHONPATH=. python benchmarks/bench_timing.py [--quick] [--big]

1. Simulation speed in simulated instructions per second (process CPU time, so other load on
   the machine matters less): the scheduler alone on a recorded program, timing-only end to end
   (values=False: tracing the kernel + scheduling) and values+timing end to end, for the
   current API and for the same matmul written in the Beta-1 API.
1b. Launch overhead: the CPU time of a two-DMA kernel, with values and profiled.
2. Growth: CPU time per instruction at N, 2N, 4N instructions (linear: ratios near 1), for row
   blocks of a taller tensor and for column blocks of a wider one.
3. A 4096 x 4096 x 4096 bf16 blocked matmul with values and timing, over the time numpy alone
   needs for the same tile arithmetic (the same 128x128x512 tile matmuls in fp32).
4. --big: timing-only over 100 GiB of trn3 HBM (inputs are zero-stride numpy views).
5. --table: issue 17's table (benchmarks/speed_table.py): timing-only, values+timing (exact
   and fast numerics) and numpy's tile loop per workload, medians of interleaved runs.

One-time start-up (loading the ISA and chip files, importing the semantics, JIT-compiling the
dtype casts) happens in a warm-up launch and is reported on its own line, not in the rates.
BLAS runs on one thread (unless OPENBLAS_NUM_THREADS/OMP_NUM_THREADS are set): with CPU time
as the measure, OpenBLAS worker threads spinning between calls would count against whichever
side calls BLAS with Python work in between, which is the simulator, not the numpy floor.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before numpy loads its BLAS

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from kernels_for_timing import (  # noqa: E402
    TILE_K,
    TILE_M,
    TILE_N,
    blocked_matmul,
    blocked_matmul_b1,
    column_chain,
    compute_chain,
    elementwise_chain,
    hbm_stream,
    tile_roundtrip,
)
from speed_table import table  # noqa: E402

from trnsim.nki.jit import _as_kernel  # noqa: E402
from trnsim.timing.costs import cost_records  # noqa: E402
from trnsim.timing.profile import profile, time_program  # noqa: E402

BF16 = ml_dtypes.bfloat16


def cpu(fn):
    t0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.process_time() - t0, time.perf_counter() - w0


def best_of(fn, repeat: int = 3) -> float:
    """Least CPU seconds of `repeat` runs (the run least disturbed by other load)."""
    return min(cpu(fn)[1] for _ in range(repeat))


def zeros(shape, dtype):
    """A zero-stride array: any size, no memory (values=False never reads it)."""
    return np.broadcast_to(np.zeros((), dtype), shape)


def trace(kernel, args, chip, values):
    return _as_kernel(kernel).launch(args, {}, chip=chip, values=values)


def speed(n: int, chip: str = "trn2") -> None:
    print(f"\n== 1. simulation speed: blocked matmul {n}^3 bf16 on {chip} ==")
    a = zeros((n, n), BF16)
    run, t_trace, _ = cpu(lambda: trace(blocked_matmul, (a, a), chip, False))
    n_ins = len(run.program)
    prof, _, _ = cpu(lambda: time_program(run.program, run.chip, values=False))
    t_sched = best_of(lambda: time_program(run.program, run.chip, values=False))
    print(
        f"instructions: {n_ins}  (simulated latency {prof.latency_ns / 1e3:.1f} us, "
        f"MFU {prof.mfu:.1f} %)"
    )
    print(f"scheduler only            : {n_ins / t_sched:10.0f} instr/s")
    print(f"timing-only (trace+sched) : {n_ins / (t_trace + t_sched):10.0f} instr/s")
    rng = np.random.default_rng(0)
    av = rng.standard_normal((n, n)).astype(BF16)
    (run_v, t_v, _) = cpu(lambda: trace(blocked_matmul, (av, av), chip, True))
    _, t_vs, _ = cpu(lambda: time_program(run_v.program, run_v.chip))
    print(f"values+timing             : {n_ins / (t_v + t_vs):10.0f} instr/s")
    x = zeros((128 * 64, 2048), BF16)
    run_e, t_te, _ = cpu(lambda: trace(elementwise_chain, (x,), chip, False))
    t_se = best_of(lambda: time_program(run_e.program, run_e.chip, values=False))
    m = len(run_e.program)
    print(
        f"elementwise chain ({m} instr): scheduler {m / t_se:.0f} instr/s, "
        f"timing-only {m / (t_te + t_se):.0f} instr/s"
    )
    run_b, t_tb, _ = cpu(lambda: trace(blocked_matmul_b1, (a, a), chip, False))
    t_sb = best_of(lambda: time_program(run_b.program, run_b.chip, values=False))
    nb = len(run_b.program)
    print(
        f"Beta-1 blocked matmul ({nb} instr: nl.load, nl.matmul, +=): scheduler "
        f"{nb / t_sb:.0f} instr/s, timing-only {nb / (t_tb + t_sb):.0f} instr/s"
    )
    run_c, t_tc, _ = cpu(lambda: trace(compute_chain, (zeros((128, 128), BF16),), chip, False))
    t_sc = best_of(lambda: time_program(run_c.program, run_c.chip, values=False))
    k = len(run_c.program)
    print(
        f"compute-only chain ({k} instr: matmul, activation, tensor_tensor): scheduler "
        f"{k / t_sc:.0f} instr/s, timing-only {k / (t_tc + t_sc):.0f} instr/s"
    )


def launch_overhead(chip: str = "trn3", repeat: int = 200) -> None:
    """What a launch costs beyond its instructions: a 2-DMA kernel with values, and profiled."""
    print("\n== 1b. launch overhead: a kernel of two DMAs ([128, 64] fp32 through SBUF) ==")
    x = np.ones((128, 64), np.float32)
    kernel = _as_kernel(tile_roundtrip)
    trace(tile_roundtrip, (x,), chip, True)
    _, t, _ = cpu(lambda: [kernel.launch((x,), {}, chip=chip, values=True) for _ in range(repeat)])
    _, tp, _ = cpu(lambda: [profile(tile_roundtrip, x, chip=chip) for _ in range(repeat)])
    print(
        f"per launch with values: {1e3 * t / repeat:.2f} ms CPU; "
        f"profiled (values + timing): {1e3 * tp / repeat:.2f} ms CPU"
    )


def growth(base_rows: int, chip: str = "trn2") -> None:
    print("\n== 2. growth with instruction count ==")
    cases = (
        ("elementwise chain, row blocks", elementwise_chain, lambda m: (128 * base_rows * m, 1024)),
        ("exp over column blocks of [128, F]", column_chain, lambda m: (128, 512 * base_rows * m)),
    )
    for name, kernel, shape in cases:
        print(name + ":")
        per = []
        for mult in (1, 2, 4):
            x = zeros(shape(mult), BF16)
            run, t_trace, _ = cpu(lambda x=x, k=kernel: trace(k, (x,), chip, False))
            t_sched = best_of(lambda run=run: time_program(run.program, run.chip, values=False))
            n = len(run.program)
            per.append(((t_trace + t_sched) / n, t_sched / n))
            print(
                f"{n:8d} instr: {1e6 * per[-1][0]:7.1f} us/instr end to end, "
                f"{1e6 * per[-1][1]:7.1f} us/instr scheduler"
            )
        print(
            "ratio of us/instr vs the smallest run (1.0 = linear): "
            + ", ".join(f"{p[0] / per[0][0]:.2f}" for p in per[1:])
            + " end to end; "
            + ", ".join(f"{p[1] / per[0][1]:.2f}" for p in per[1:])
            + " scheduler"
        )


def numpy_floor(a: np.ndarray, b: np.ndarray) -> float:
    """CPU seconds numpy needs for the kernel's tile arithmetic alone."""
    k_dim, m_dim = a.shape
    n_dim = b.shape[1]

    def run():
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

    _, t, _ = cpu(run)
    return t


def matmul_overhead(n: int, chip: str = "trn2") -> None:
    print(f"\n== 3. {n}x{n}x{n} bf16 blocked matmul: values+timing vs numpy floor ==")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(BF16)
    b = rng.standard_normal((n, n)).astype(BF16)
    floor = numpy_floor(a, b)
    run, t_run, w_run = cpu(lambda: trace(blocked_matmul, (a, b), chip, True))
    prof, t_sched, w_sched = cpu(lambda: time_program(run.program, run.chip))
    ref = a.astype(np.float32).T @ b.astype(np.float32)
    err = float(np.max(np.abs(run.outputs - ref)) / np.max(np.abs(ref)))
    print(
        f"instructions {len(run.program)}, simulated {prof.latency_ns / 1e3:.1f} us, "
        f"MFU {prof.mfu:.1f} %, max rel err {err:.1e}"
    )
    print(
        f"numpy floor {floor:.2f} s CPU; simulate (values) {t_run:.2f} s + timing "
        f"{t_sched:.2f} s CPU (wall {w_run + w_sched:.2f} s)"
    )
    print(
        f"overhead ratio values+timing / numpy floor: {(t_run + t_sched) / floor:.2f}x "
        f"(timing alone adds {t_sched / floor:.2f}x)"
    )


def big_hbm(chip: str = "trn3") -> None:
    print("\n== 4. timing-only over 100 GiB of trn3 HBM ==")
    rows, free = 128 * 3200, 64 * 1024  # bf16: 50 GiB in, 50 GiB out
    x = zeros((rows, free), BF16)
    gib = 2 * x.size * 2 / 2**30
    run, t_trace, _ = cpu(lambda: trace(hbm_stream, (x, x), chip, False))
    prof, t_sched, _ = cpu(lambda: time_program(run.program, run.chip, values=False))
    print(
        f"{gib:.0f} GiB of HBM touched, {len(run.program)} instructions, simulated "
        f"{prof.latency_ns / 1e6:.2f} ms ({prof.mbu:.0f} % MBU), CPU {t_trace + t_sched:.1f} s"
    )


def warm_up(chip: str = "trn2") -> None:
    """Launch each benchmark kernel once, small, with and without values: one-time costs."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((256, 512)).astype(BF16)
    x = rng.standard_normal((256, 256)).astype(BF16)

    def run():
        cost_records()  # isa/costs.yaml
        for values in (False, True):
            r = trace(blocked_matmul, (a, a), chip, values)
            time_program(r.program, r.chip, values=values)
            r = trace(elementwise_chain, (x,), chip, values)
            time_program(r.program, r.chip, values=values)
            r = trace(blocked_matmul_b1, (a, a), chip, values)
            time_program(r.program, r.chip, values=values)

    _, t, _ = cpu(run)
    blas = os.environ.get("OPENBLAS_NUM_THREADS", "?")
    print(
        f"one-time start-up (warm-up launches, not in the figures below): {t:.2f} s CPU; "
        f"BLAS threads: {blas}"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller sizes")
    ap.add_argument("--big", action="store_true", help="also time 100 GiB of trn3 HBM")
    ap.add_argument("--table", action="store_true", help="only issue 17's side-by-side table")
    args = ap.parse_args()
    if args.table:
        warm_up()
        table(args.quick)
        return
    warm_up()
    speed(1024 if args.quick else 2048)
    launch_overhead()
    growth(64 if args.quick else 256)
    matmul_overhead(1024 if args.quick else 4096)
    if args.big:
        big_hbm()


if __name__ == "__main__":
    main()
