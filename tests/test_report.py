"""Profiles as timelines: Perfetto files decoded with Perfetto's protos, summaries, diffs, CLI."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

import trnsim
from trnsim import report
from trnsim.trace import read_perfetto

DATA = pathlib.Path(__file__).parent / "data"


def matmul_kernel(lhs_t, rhs):
    k, m = lhs_t.shape
    n = rhs.shape[1]
    out = nl.ndarray((m, n), nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((m, n), nl.float32, buffer=nl.psum)
    for i in nl.affine_range(k // 128):
        a = nl.ndarray((128, m), lhs_t.dtype, buffer=nl.sbuf)
        b = nl.ndarray((128, n), rhs.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=lhs_t[i * 128:(i + 1) * 128, :])
        nisa.dma_copy(dst=b, src=rhs[i * 128:(i + 1) * 128, :])
        nisa.nc_matmul(acc, a, b)
    res = nl.ndarray((m, n), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(res, acc)
    nisa.dma_copy(dst=out, src=res)
    return out


MATMUL_LINE = matmul_kernel.__code__.co_firstlineno + 10  # the nc_matmul line


@pytest.fixture(scope="module")
def prof():
    lt = np.ones((512, 128), np.float32)
    r = np.ones((512, 512), np.float32)
    return trnsim.profile(matmul_kernel, lt, r, chip="trn2")


def test_pftrace_has_engine_tracks_sources_flows_counters(prof, tmp_path):
    path = str(tmp_path / "mm.pftrace")
    prof.save(path)
    t = read_perfetto(path)
    tracks = {p.track_descriptor.uuid: p.track_descriptor.name for p in t.packet
              if p.HasField("track_descriptor")}
    names = set(tracks.values())
    for row in ("Sync(nc0)", "Tensor(nc0)", "TensorMatrix(nc0)", "Vector(nc0)", "Scalar(nc0)",
                "GpSimd(nc0)"):
        assert row in names
    assert any(n.startswith("q") and n.endswith("(nc0)") for n in names), "no DMA queue track"
    begins = [p.track_event for p in t.packet
              if p.HasField("track_event") and p.track_event.type == 1]
    matmuls = [e for e in begins if e.name == "MATMUL"]
    assert len(matmuls) == 4
    assert {e.source_location.line_number for e in matmuls} == {MATMUL_LINE}
    assert all(os.path.basename(e.source_location.file_name) == "test_report.py" for e in matmuls)
    assert all(tracks[e.track_uuid].startswith("TensorMatrix(nc0)") for e in matmuls)
    lds = [e for e in begins if e.name == "LDWEIGHTS"]
    assert len(lds) == 4 and all(tracks[e.track_uuid].startswith("Tensor(nc0)") for e in lds)
    ann = {a.name for a in matmuls[0].debug_annotations}
    assert {"operands", "bytes", "wait_ns", "nki_source_location"} <= ann
    ops = next(a.string_value for a in matmuls[0].debug_annotations if a.name == "operands")
    assert "float32@sbuf[0:128][128, 128]" in ops
    assert sum(len(e.flow_ids) for e in begins) > 0
    assert sum(len(e.terminating_flow_ids) for e in begins) > 0
    counter_names = {n for u, n in tracks.items()
                     if any(p.HasField("track_event") and p.track_event.type == 4
                            and p.track_event.track_uuid == u for p in t.packet)}
    for c in ("SBUF usage(nc0)", "PSUM usage(nc0)", "Pending DMA count", "HBM throughput",
              "DMA throughput", "TensorE utilization(nc0)", "TensorE throttle(nc0)",
              "PSUM bank0 usage(nc0)"):
        assert c in counter_names, c


def test_dma_rows_per_engine(prof, tmp_path):
    t = report.to_trace(prof, dma_rows="engine")
    assert any(name.startswith("DMA-E") for name, _ in t.tracks)


def test_summary_names_and_insights(prof):
    s = report.summary(prof, "mm")
    for key in ("total_time", "tensor_matrix_active_time_percent", "vector_instruction_count",
                "mfu_estimated_percent", "mbu_estimated_percent", "hbm_read_bytes",
                "average_dma_size", "top_lines", "insights"):
        assert key in s
    assert s["hbm_read_bytes"] == (512 * 128 + 512 * 512) * 4
    assert s["top_lines"][0]["location"].startswith("test_report.py:")
    assert any("bound" in i for i in s["insights"])
    text = report.format_summary(s)
    assert "mfu_estimated_percent" in text and "insights:" in text


def test_diff_reports_total_engines_and_lines(prof):
    s = report.summary(prof, "mm")
    faster = json.loads(json.dumps(s))
    faster["total_time_us"] = s["total_time_us"] / 2
    d = report.diff(s, faster)
    assert "speedup 2.00x" in d
    assert "tensor_matrix" in d
    assert "test_report.py:" in d


def test_png_is_written(prof, tmp_path):
    path = prof.plot(str(tmp_path / "mm.png"))
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def _trnsim(*args, cwd):
    return subprocess.run([sys.executable, "-m", "trnsim", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def test_cli_profile_view_diff_on_a_two_kernel_script(tmp_path):
    script = str(DATA / "two_kernels.py")
    a = _trnsim("profile", script, "-o", "a.pftrace", "--png", "a.png", "--chip", "trn2",
                cwd=tmp_path)
    assert a.returncode == 0, a.stderr
    assert "wrote a.pftrace (2 launches)" in a.stdout
    assert (tmp_path / "a.png").exists()
    t = read_perfetto(str(tmp_path / "a.pftrace"))
    kernels = [p.track_event.name for p in t.packet
               if p.HasField("track_event") and p.track_event.type == 1
               and p.track_event.name.endswith("_kernel")]
    assert kernels == ["scale_kernel", "matmul_kernel"]
    b = _trnsim("profile", script, "3.0", "-o", "b.json", "--chip", "trn2", cwd=tmp_path)
    assert b.returncode == 0, b.stderr
    v = _trnsim("view", "a.pftrace", cwd=tmp_path)
    assert v.returncode == 0, v.stderr
    assert "kernel scale_kernel on trn2" in v.stdout and "kernel matmul_kernel on trn2" in v.stdout
    vj = _trnsim("view", "a.pftrace", "--json", cwd=tmp_path)
    assert [s["kernel"] for s in json.loads(vj.stdout)] == ["scale_kernel", "matmul_kernel"]
    vp = _trnsim("view", "a.pftrace", "--png", "v.png", cwd=tmp_path)
    assert vp.returncode == 0, vp.stderr
    assert (tmp_path / "v.png").exists()
    d = _trnsim("diff", "a.pftrace", "b.json", cwd=tmp_path)
    assert d.returncode == 0, d.stderr
    assert d.stdout.count("total_time_us") == 2


_LOOP_SCRIPT = """
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np


def loop_kernel(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    for k in nl.affine_range(x.shape[0] // 128):
        t = nl.ndarray((128, x.shape[1]), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[k * 128:(k + 1) * 128, :])
        nisa.activation(dst=t, op=nl.exp, data=t)
        nisa.dma_copy(dst=out[k * 128:(k + 1) * 128, :], src=t)
    return out


nki.simulate(loop_kernel)(np.zeros((512, 256), np.float32))
"""


def _loop_totals(tmp_path, runs: dict[str, list[str]],
                 script: str = _LOOP_SCRIPT) -> dict[str, float]:
    """`trnsim profile loop.py -o NAME.json --chip trn2 EXTRA...` per run: its total time."""
    (tmp_path / "loop.py").write_text(script)
    total = {}
    for name, extra in runs.items():
        r = _trnsim("profile", "loop.py", "-o", f"{name}.json", "--chip", "trn2", *extra,
                    cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        with open(tmp_path / f"{name}.json.summary.json") as f:
            (launch,) = json.load(f)["launches"]
        total[name] = launch["total_time_us"]
    return total


def test_cli_profile_as_written_times_program_order(tmp_path):
    """`--as-written` (here after the script) times program order: the loop's loads then wait
    behind the previous stores, which the default compiler order moves them ahead of."""
    total = _loop_totals(tmp_path, {"default": [], "written": ["--as-written"]})
    assert total["default"] < total["written"]


def test_cli_profile_allocation_what_if(tmp_path):
    """`--allocation` re-places the loop's automatic tiles: ring (fresh bytes per tile) is
    not slower than the traced addresses, max_reuse (the bytes just freed) makes each load wait
    for the previous iteration; a policy that does not exist is refused before the run."""
    total = _loop_totals(tmp_path, {"default": [], "ring": ["--allocation", "ring"],
                                    "max_reuse": ["--allocation", "max_reuse"]})
    assert total["ring"] <= total["default"] < total["max_reuse"]
    r = _trnsim("profile", "loop.py", "--allocation", "best", cwd=tmp_path)
    assert r.returncode != 0
    assert "--allocation 'best' is not an allocation policy (allowed: traced, ring" in r.stderr
    assert "Traceback" not in r.stderr


_B1_LOOP_SCRIPT = """
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def python_loop(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in range(x.shape[0]):
        t = nl.load(x[i])
        nl.store(out[i], value=nl.exp(t))
    return out


python_loop(np.zeros((4, 128, 512), np.float32))
"""


def test_cli_profile_rule_off_what_if(tmp_path):
    """`--rule-off sequential_buffers`: the Beta-1 Python loop's iterations no longer share
    their tiles' buffers, so loads overlap the previous iteration and the launch is shorter; a
    rule that does not exist, or one that acts while the kernel runs, is refused before it."""
    total = _loop_totals(tmp_path, {"on": [], "off": ["--rule-off", "sequential_buffers"]},
                         _B1_LOOP_SCRIPT)
    assert total["off"] < total["on"]
    for bad in ("sequential_buffer", "evict_by_next_use"):
        r = _trnsim("profile", "loop.py", "--rule-off", bad, cwd=tmp_path)
        assert r.returncode != 0
        assert f"--rule-off {bad!r} is not a compiler rule" in r.stderr
        assert "allowed: drop_psum_zero_fill" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.skipif(not (shutil.which("trace_processor_shell")
                         or os.environ.get("TRNSIM_TRACE_PROCESSOR")),
                    reason="no Perfetto trace-processor binary on this machine (it cannot be "
                           "downloaded here); set TRNSIM_TRACE_PROCESSOR to its path")
def test_trace_processor_sql_finds_the_same_facts(prof, tmp_path):
    from perfetto.trace_processor import TraceProcessor, TraceProcessorConfig

    path = str(tmp_path / "mm.pftrace")
    prof.save(path)
    binary = os.environ.get("TRNSIM_TRACE_PROCESSOR") or shutil.which("trace_processor_shell")
    tp = TraceProcessor(trace=path, config=TraceProcessorConfig(bin_path=binary))
    try:
        n = tp.query("select count(*) as n from slice where name = 'MATMUL'").as_pandas_dataframe()
        assert int(n["n"][0]) == 4
        tracks = tp.query("select name from track").as_pandas_dataframe()
        assert "TensorMatrix(nc0)" in set(tracks["name"])
        flows = tp.query("select count(*) as n from flow").as_pandas_dataframe()
        assert int(flows["n"][0]) > 0
    finally:
        tp.close()


def test_insights_name_cross_core_races():
    import warnings

    import trnsim.nki as nki
    import trnsim.nki.isa as nisa
    import trnsim.nki.language as nl
    from trnsim.report import summary
    from trnsim.timing.profile import profile

    def both_write(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.dma_copy(dst=out, src=t)  # both programs write all of `out`
        return out

    x = np.ones((128, 8), np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        racy = profile(nki.jit(both_write)[2], x, chip="trn2")
        calm = profile(nki.jit(both_write), x, chip="trn2")
    assert any(i.startswith("Cross-core races: 1 pair") for i in summary(racy)["insights"])
    assert not any("Cross-core" in i for i in summary(calm)["insights"])
