"""Golden traces: each example script and library kernel has a recorded timeline in traces/.

A run is compared event by event with its golden file; the first differing event is reported.
Regenerate on purpose with `pytest --update-traces tests/test_golden_traces.py` and explain the
change in the commit.
"""

from __future__ import annotations

import pathlib
import sys

import pytest

from trnsim import report
from trnsim.nki.runner import record_launches, stop_recording
from trnsim.timing.profile import time_program
from trnsim.trace import diff_golden

ROOT = pathlib.Path(__file__).resolve().parents[1]
TRACES = ROOT / "traces"
# The NKI examples (examples/ga, examples/beta1). The PyTorch examples (examples/torch) launch
# the device's kernels, whose traces change with the kernel library: their runs are checked by
# tests/backend/test_examples_torch.py instead.
EXAMPLES = sorted(p for p in (ROOT / "examples").glob("*/*.py") if p.parent.name != "torch")


def _golden_lines_of_script(path: pathlib.Path) -> list[str]:
    from trnsim.cli import run_script

    runs: list = []
    token = record_launches(runs)
    argv = sys.argv
    try:
        run_script(str(path), [])
    finally:
        stop_recording(token)
        sys.argv = argv
    assert runs, f"{path.name} launched no kernel"
    profiles = [(r.kernel_name, time_program(r.program, r.chip)) for r in runs]
    return report.concatenate(profiles).golden_lines()


def _library_cases():
    """name -> (kernel, inputs): every library kernel at a small deterministic shape."""
    import ml_dtypes
    import numpy as np
    from trnsim.kernels import attention, matmul, moe, norms, quantization, softmax

    from trnsim.demo import demo_inputs

    rng = np.random.default_rng(0)
    bf16 = ml_dtypes.bfloat16

    def randn(*shape, scale=1.0):
        return (scale * rng.standard_normal(shape)).astype(np.float32)

    x = randn(256, 1024).astype(bf16)
    w = randn(1024).astype(bf16)
    a, b = randn(256, 384), randn(384, 512)
    aq, a_scale = quantization.quantize_fp8_ref(a)
    bq_t, b_scale = quantization.quantize_fp8_ref(b.T)
    t, h, e, f = 256, 256, 4, 256
    return {
        "kernels_matmul__bf16_512": (matmul.matmul, demo_inputs("matmul", 512)),
        "kernels_matmul_naive__bf16_512": (matmul.matmul_naive, demo_inputs("matmul", 512)),
        "kernels_attention__bf16_s256": (attention.attention, demo_inputs("attention", 256)),
        "kernels_rmsnorm__bf16_256x1024": (norms.rmsnorm, (x, w)),
        "kernels_layernorm__bf16_256x1024": (norms.layernorm, (x, w, w)),
        "kernels_softmax__bf16_256x1024": (softmax.softmax, (x,)),
        "kernels_quantize_fp8__bf16_256x1024": (quantization.quantize_fp8, (x,)),
        "kernels_matmul_fp8__256x384x512": (quantization.matmul_fp8, (
            np.ascontiguousarray(aq.T), np.ascontiguousarray(bq_t.T), a_scale, b_scale)),
        "kernels_moe_ffn__t256_h256_e4_f256": (moe.moe_ffn, (
            randn(t, h).astype(bf16), randn(h, e, scale=0.1).astype(bf16),
            randn(e, h, f, scale=0.05).astype(bf16), randn(e, h, f, scale=0.05).astype(bf16),
            randn(e, f, h, scale=0.05).astype(bf16))),
    }


LIBRARY_CASES = ("kernels_matmul__bf16_512", "kernels_matmul_naive__bf16_512",
                 "kernels_attention__bf16_s256", "kernels_rmsnorm__bf16_256x1024",
                 "kernels_layernorm__bf16_256x1024", "kernels_softmax__bf16_256x1024",
                 "kernels_quantize_fp8__bf16_256x1024", "kernels_matmul_fp8__256x384x512",
                 "kernels_moe_ffn__t256_h256_e4_f256")


def _check(name: str, lines: list[str], update: bool) -> None:
    path = TRACES / f"{name}.trace.jsonl"
    if update:
        TRACES.mkdir(exist_ok=True)
        path.write_text("\n".join(lines) + "\n")
        return
    if not path.exists():
        pytest.fail(f"no golden trace {path.relative_to(ROOT)}; run "
                    "`pytest --update-traces tests/test_golden_traces.py` to record it")
    expected = path.read_text().splitlines()
    msg = diff_golden(expected, lines)
    assert msg is None, f"{path.name}: {msg}"


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_example_trace_matches_golden(script, update_traces, monkeypatch):
    monkeypatch.chdir(script.parent)
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn3")
    _check(f"examples_{script.parent.name}_{script.stem}", _golden_lines_of_script(script),
           update_traces)


@pytest.mark.parametrize("name", LIBRARY_CASES)
def test_library_kernel_trace_matches_golden(name, update_traces):
    kernel, args = _library_cases()[name]
    prof = trnsim_profile(kernel, args)
    _check(name, report.to_trace(prof, name).golden_lines(), update_traces)


def trnsim_profile(kernel, args):
    from trnsim.timing.profile import profile

    return profile(kernel, *args, chip="trn3")


def test_golden_traces_have_no_orphans():
    known = {f"examples_{p.parent.name}_{p.stem}" for p in EXAMPLES} | set(LIBRARY_CASES)
    orphans = [p.name for p in TRACES.glob("*.trace.jsonl")
               if p.name.removesuffix(".trace.jsonl") not in known]
    assert not orphans, f"golden traces without a case: {orphans}"


def test_trace_files_are_deterministic():
    kernel, args = _library_cases()["kernels_matmul__bf16_512"]
    a = report.to_trace(trnsim_profile(kernel, args), "x").golden_lines()
    b = report.to_trace(trnsim_profile(kernel, args), "x").golden_lines()
    assert a == b
