"""tools/nkilib_multirank.py (loaded by nkilib_upstream_fixes): multi-rank harness tests run
every rank through run_ranks and leave per-rank output files; single-rank tests keep the
harness's path. nki-library's harness is not needed: the modules the plugin reads
(test.utils.test_orchestrator, test.utils.common_dataclasses) are small stand-ins made here
with the names and behaviour the plugin uses."""

from __future__ import annotations

import contextlib
import os
import pathlib
import sys
import types

import numpy as np
import pytest

TOOLS = pathlib.Path(__file__).resolve().parents[1] / "tools"
sys.path.insert(0, str(TOOLS))
import nkilib_multirank as mr  # noqa: E402

from trnsim.nki import collectives as cc  # noqa: E402
from trnsim.nki import isa as nisa  # noqa: E402
from trnsim.nki import language as nl  # noqa: E402

N = 4


def gather_kernel(x, group):
    src = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)  # LNC=1: private collective tensors
    dst = nl.ndarray((x.shape[0] * N, x.shape[1]), x.dtype, buffer=nl.hbm)
    nisa.dma_copy(dst=src, src=x)
    cc.all_gather([src], [dst], group, collective_dim=0)
    out = nl.ndarray(dst.shape, x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=dst)
    zeros = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=zeros, value=0.0)
    nisa.dma_copy(dst=x, src=zeros)  # writes its (aliased) input in place
    return out


class PerRankInputs:
    """Stand-in for PerRankLazyInputGenerator: for_rank(r) -> keyword dict."""

    def __init__(self, fn):
        self.fn = fn

    def for_rank(self, rank_id):
        return self.fn(rank_id)


class PerRankGolden(PerRankInputs):
    pass


def normalize_golden_output(golden, rank_id=0):
    return golden.for_rank(rank_id) if isinstance(golden, PerRankGolden) else golden


class InferenceException(Exception):
    pass


class Collector:
    def timer(self, name):
        return contextlib.nullcontext()


class Orchestrator:
    """The orchestrator's parts the plugin uses; the original method records that it ran."""

    def __init__(self, out_dir):
        self.fs_config = types.SimpleNamespace(artifacts_output_directory_path=str(out_dir))
        self.emitter = types.SimpleNamespace(get_collector=Collector)
        self.single = 0

    def _run_simulator_inference(self, kernel_under_test):
        self.single += 1
        return "single-rank path"

    def __dump_tensors__(self, target_directory, tensors, name_fn):
        os.makedirs(target_directory, exist_ok=True)
        for name, value in tensors.items():
            value.tofile(os.path.join(target_directory, name_fn(name) + ".bin"))


@pytest.fixture
def harness(monkeypatch):
    import nki  # trnsim's alias (tests/conftest.py installs it), as in simulation mode

    import trnsim.nki

    assert nki is trnsim.nki
    monkeypatch.setitem(sys.modules, "nki", trnsim.nki)
    orch_mod = types.ModuleType(mr.ORCH)
    orch_mod.Orchestrator = type("Orchestrator", (Orchestrator,), {})
    orch_mod.MetricName = types.SimpleNamespace(SIMULATION_TIME="simulation_time")
    orch_mod.InferenceException = InferenceException
    data_mod = types.ModuleType(mr.DATA)
    data_mod.normalize_golden_output = normalize_golden_output
    data_mod.INF_ARTIFACT_DIR_NAME = "infer_result"
    monkeypatch.setitem(sys.modules, mr.ORCH, orch_mod)
    monkeypatch.setitem(sys.modules, mr.DATA, data_mod)
    monkeypatch.setenv("NKI_NC_VERSION", "gen2")
    monkeypatch.delenv("NEURON_PLATFORM_TARGET_OVERRIDE", raising=False)
    assert mr.install() and mr.install()  # idempotent
    return orch_mod.Orchestrator


def kernel_args(kernel_input, golden, ranks):
    platform = types.SimpleNamespace(get_nc_gen=lambda: "gen3")
    return types.SimpleNamespace(
        kernel_func=gather_kernel,
        kernel_input=kernel_input,
        compiler_input=types.SimpleNamespace(platform_target=platform, logical_nc_config=1),
        validation_args=types.SimpleNamespace(golden_output=golden),
        inference_args=types.SimpleNamespace(collective_ranks=ranks))


def test_every_rank_runs_and_writes_its_outputs(harness, tmp_path):
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((8, 16)).astype(np.float32) for _ in range(N)]
    kept = [x.copy() for x in xs]
    group = cc.ReplicaGroup([list(range(N))])
    inputs = PerRankInputs(lambda rank_id: {"x.must_alias_input": xs[rank_id], "group": group})
    golden = PerRankGolden(lambda rank_id: {"out": np.zeros((8 * N, 16), np.float32)})
    orch = harness(tmp_path)
    where = orch._run_simulator_inference(kernel_args(inputs, golden, N))
    assert where == str(tmp_path / "infer_result") and orch.single == 0
    assert os.environ["NKI_NC_VERSION"] == "gen3"  # the platform's, as the harness sets it
    want = np.concatenate(xs)
    for r in range(N):
        got = np.fromfile(tmp_path / "infer_result" / f"output_worker_{r}" / "out.bin",
                          np.float32).reshape(want.shape)
        np.testing.assert_array_equal(got, want)
    for x, k in zip(xs, kept, strict=True):  # each rank had its own copy of the inputs
        np.testing.assert_array_equal(x, k)


def test_single_rank_keeps_the_harness_path(harness, tmp_path):
    orch = harness(tmp_path)
    assert orch._run_simulator_inference(kernel_args({}, {}, 1)) == "single-rank path"
    assert orch.single == 1


def test_errors_become_the_harness_inference_exception(harness, tmp_path):
    group = cc.ReplicaGroup([list(range(N))])
    x = np.zeros((8, 16), np.float32)
    golden = {"a": x, "b": x}  # two names, the kernel returns one output
    with pytest.raises(InferenceException, match="rank 0: kernel returned 1 outputs but "
                                                  "expected 2"):
        harness(tmp_path)._run_simulator_inference(
            kernel_args({"x": x, "group": group}, golden, N))
