"""Whole-kernel check of the timing model: simulated latency of whole kernels against latencies
published for real hardware (not part of the test suite). Since issue 16 these trn1 points are
the calibration set of benchmarks/calibrate.py (five listed trn1 parameters are fitted to
them, see README "Fidelity report"); they no longer judge the model out of sample.

    PYTHONPATH=. python benchmarks/heldout.py [--only NAME ...]

The kernels are the project's own (examples/ and benchmarks/heldout_kernels/), written after
the algorithm each publication describes (tile sizes, loop order, instruction choices); they
are timed with values=False on the published chip and shape. The table prints simulated /
published: above 1 the model is slower than the hardware was. See README "Held-out check" for
what the differences come from.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

import trnsim
from trnsim.nki.jit import _as_kernel
from trnsim.nki.runner import resolve_chip
from trnsim.timing.profile import time_program

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BF16 = np.dtype(ml_dtypes.bfloat16)
F32 = np.dtype(np.float32)

_MM_TUTORIAL = (
    "Neuron docs v2.20-2.23, NKI matrix multiplication tutorial, performance table "
    "(nki.benchmark, p99 nc_latency, trn1.32xlarge, BF16); aws-neuron-sdk commit 4eba310, "
    "general/nki/tutorials/matrix_multiplication.rst"
)
_NKIBENCH = (
    "NKIBench baseline kernels (github.com/zhang677/AccelOpt at 2dbeab4, "
    "experiments/full_complete_local/profile_results.csv: mean neuron-profile total_time of "
    "10 runs, trn1.32xlarge, one NeuronCore, fp32)"
)
_SD_ATTENTION = (
    "charleshong3.github.io/blog/autocomp_trainium_attention.html: the tutorial kernel before "
    "optimisation, slowest nc_latency of 10 runs on trn1.2xlarge (third-party measurement)"
)


@dataclass
class Case:
    name: str
    path: str  # the kernel's file, from the repository root
    kernel: str  # function in it
    shapes: tuple[tuple[int, ...], ...]
    dtype: np.dtype
    published_ms: float
    source: str
    chip: str = "trn1"
    kwargs: dict = field(default_factory=dict)
    published_hfu: float | None = None  # percent, where published


# The matmul tutorial: lhsT [K=8192, M=4096], rhs [K, N=8192], bf16.
_MM_FILE = "examples/beta1/matmul_tutorial.py"
_MM = ((8192, 4096), (8192, 8192))
CASES = [
    Case("matmul tiled", _MM_FILE, "matmul_tiled", _MM, BF16, 51.80,
         _MM_TUTORIAL, published_hfu=10.98),
    Case("matmul hoisted loads", _MM_FILE, "matmul_hoisted", _MM, BF16,
         42.96, _MM_TUTORIAL, published_hfu=13.24),
    Case("matmul blocked free dims (2x2)", _MM_FILE, "matmul_blocked", _MM,
         BF16, 22.07, _MM_TUTORIAL, kwargs=dict(tiles_m=2, tiles_n=2), published_hfu=26.51),
    Case("matmul blocked M, N, K (16x2x8)", _MM_FILE, "matmul_optimized",
         _MM, BF16, 6.97, _MM_TUTORIAL, kwargs=dict(tiles_m=16, tiles_n=2, tiles_k=8),
         published_hfu=85.24),
    Case("SD self-attention 4096x64", "examples/beta1/sd_attention.py", "sd_attention",
         ((4096, 64),) * 3, F32, 0.558, _SD_ATTENTION),
    Case("NKIBench rmsnorm_matmul", "benchmarks/heldout_kernels/nkibench_rmsnorm_matmul.py",
         "rmsnorm_matmul", ((32, 128, 1024), (8, 128, 2048)), F32, 1.056, _NKIBENCH),
    Case("NKIBench add_rmsnorm_matmul",
         "benchmarks/heldout_kernels/nkibench_add_rmsnorm_matmul.py", "add_rmsnorm_matmul",
         ((4096, 1024), (1024, 2048), (4096, 1024), (1024,)), F32, 1.222, _NKIBENCH,
         kwargs={"eps": 1e-5}),
    Case("NKIBench matmul_add_rmsnorm",
         "benchmarks/heldout_kernels/nkibench_matmul_add_rmsnorm.py", "matmul_add_rmsnorm",
         ((4096, 2048), (2048, 2048), (4096, 2048), (2048,)), F32, 2.667, _NKIBENCH,
         kwargs={"eps": 1e-5}),
    Case("NKIBench rope", "benchmarks/heldout_kernels/nkibench_rope.py", "rope",
         ((128, 262144), (64, 262144), (64, 262144)), F32, 4.333, _NKIBENCH),
    Case("NKIBench silu", "benchmarks/heldout_kernels/nkibench_silu.py", "silu",
         ((128, 32, 7168),), F32, 1.333, _NKIBENCH),
    Case("NKIBench adamw", "benchmarks/heldout_kernels/nkibench_adamw.py", "adamw",
         ((10944, 2048),) * 4, F32, 2.000, _NKIBENCH),
    Case("NKIBench bmm", "benchmarks/heldout_kernels/nkibench_bmm.py", "bmm",
         ((16, 4096, 64), (16, 64, 4096)), F32, 4.611, _NKIBENCH),
    Case("NKIBench transpose_matmul",
         "benchmarks/heldout_kernels/nkibench_transpose_matmul.py", "transpose_matmul",
         ((128, 16, 4096), (128, 16, 10944)), F32, 9.610, _NKIBENCH),
    Case("NKIBench mamba", "benchmarks/heldout_kernels/nkibench_mamba.py", "mamba",
         ((256, 7168), (256, 7168), (256, 16), (16, 7168), (16, 7168)), F32, 2.889,
         _NKIBENCH),
    Case("NKIBench swiglu", "benchmarks/heldout_kernels/nkibench_swiglu.py", "swiglu",
         ((8, 4, 128, 8, 128), (8, 128, 3072), (24, 128, 1024), (8, 128, 3072)), F32, 4.222,
         _NKIBENCH),
    Case("NKIBench bmm_softmax", "benchmarks/heldout_kernels/nkibench_bmm_softmax.py",
         "bmm_softmax", ((16, 4096, 64), (16, 64, 4096)), F32, 12.000, _NKIBENCH),
    Case("NKIBench lora", "benchmarks/heldout_kernels/nkibench_lora.py", "lora",
         ((8, 4, 128, 40, 128), (40, 128, 12288), (40, 128, 128), (128, 12288)), F32, 30.166,
         _NKIBENCH),
    Case("NKIBench matmul", "benchmarks/heldout_kernels/nkibench_matmul.py", "matmul",
         ((32, 128, 40, 128), (40, 128, 12288)), F32, 35.200, _NKIBENCH),
    Case("NKIBench gqa_full", "benchmarks/heldout_kernels/nkibench_gqa.py", "gqa",
         ((32, 128, 16, 128), (1, 8, 4, 128, 8, 128), (1, 32, 128, 1024)), F32, 19.111,
         _NKIBENCH),
]  # fmt: skip


def _kernel(case: Case):
    trnsim.install_nki_aliases()
    path = os.path.join(ROOT, case.path)
    name = "heldout_" + os.path.splitext(os.path.basename(path))[0]
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
    return getattr(module, case.kernel)


def _busiest(prof) -> str:
    core_rows = {row: ns for (_, row), ns in prof.engine_active_ns.items()}
    row, ns = max(core_rows.items(), key=lambda kv: kv[1])
    return f"{row} {100 * ns / prof.latency_ns:.0f}%"


def run(case: Case) -> None:
    args = [np.broadcast_to(np.zeros((), case.dtype), s) for s in case.shapes]
    t0 = time.process_time()
    kernel = _kernel(case)
    run = _as_kernel(kernel).launch(args, case.kwargs, chip=resolve_chip(case.chip), values=False)
    allocs = run.device.allocations  # (the chip's allocation policy re-places tiles by them)
    prof = time_program(run.program, run.chip, values=False, allocations=allocs)
    written = time_program(run.program, run.chip, values=False, reorder=False,
                           allocations=allocs)
    cpu = time.process_time() - t0
    sim_ms, written_ms = prof.latency_ns / 1e6, written.latency_ns / 1e6
    hfu = f"{case.published_hfu:5.1f}" if case.published_hfu is not None else "    -"
    print(
        f"{case.name:34s} {case.chip:5s} {sim_ms:8.3f} {written_ms:8.3f} {case.published_ms:8.3f} "
        f"{sim_ms / case.published_ms:5.2f} {written_ms / case.published_ms:5.2f}  "
        f"{prof.hfu:5.1f} {hfu} {prof.mbu:5.1f}  {_busiest(prof):20s} "
        f"{len(prof.program):7d} {cpu:5.1f}",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*", help="run the cases whose name contains one of these")
    opts = ap.parse_args()
    cases = [c for c in CASES if not opts.only or any(s in c.name for s in opts.only)]
    print(
        "sim: the compiler's order (default); written: program order (reorder=False); "
        "ratios are over the published latency; HFU/MBU/busiest engine: sim\n"
    )
    print(
        f"{'kernel':34s} {'chip':5s} {'sim ms':>8s} {'written':>8s} {'pub ms':>8s} "
        f"{'ratio':>5s} {'(wr.)':>5s}  {'HFU':>5s} {'pub':>5s} {'MBU':>5s}  "
        f"{'busiest engine':20s} {'instr':>7s} {'cpu s':>5s}"
    )
    for case in cases:
        run(case)
    print("\nSources:")
    for source in dict.fromkeys(c.source for c in cases):
        print(f"- {source}")


if __name__ == "__main__":
    main()
