"""The `trn` torch.distributed backend on 2 and 4 processes: every collective against numpy;
DDP, FSDP2 (the llama debug model, 3 steps) and tensor parallelism equal to the same run on
the CPU over gloo; collective time from the topology on every rank's clock; the merged step
timeline; errors for a world-size mismatch, mismatched shapes and a rank that skips a
collective. Each launch forks its ranks from one forkserver (harness.py) and is time-limited.
The default tier launches 2 ranks in reference mode; kernel mode, 4 and 8 ranks and torchrun
are the slow tier (`-m slow`).

Tolerances: reference mode runs PyTorch's CPU kernels on the device's bytes, so DDP and TP
losses match the CPU run exactly; FSDP2 reduces gradients differently per backend (gloo: pre-
and post-division by a factor; trn: the AVG reduce, a sum then one division), so its losses
agree to rtol 1e-6 and parameters to atol 1e-4. Kernel mode (NKI kernels, fp32 accumulation
in another order) as tests/backend/test_training.py: losses rtol 1e-4, parameters atol 2e-4.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).parent))
from dist_worker import _rank_tensor  # noqa: E402
from harness import launch  # noqa: E402

TOL = {"kernel": (1e-4, 2e-4), "reference": (0.0, 1e-4)}


LAUNCHES = [
    # 2 ranks, reference mode, each rank on trn:<rank> (set_device), then the error cases
    pytest.param((2, "reference"), id="2-reference"),
    # kernel mode (NKI kernels for every op) and 4 ranks cost a minute each: the slow tier
    pytest.param((2, "kernel"), id="2-kernel", marks=pytest.mark.slow),
    pytest.param((4, "reference"), id="4-reference", marks=pytest.mark.slow),
]


@pytest.fixture(scope="module", params=LAUNCHES)
def world(request, tmp_path_factory):
    """One launch of the "main" scenario: collectives, DDP, FSDP2 llama (profiled), TP, then
    the error cases; returns (results per rank, mode, output folder)."""
    ranks, mode = request.param
    out = tmp_path_factory.mktemp(f"main{ranks}{mode}")
    env = {"TRNSIM_MODE": mode, "TEST_SET_DEVICE": "1", "TEST_THEN_ERRORS": "1"}
    return launch("main", ranks, out, env), mode, out


def _ok(results):
    for r, res in enumerate(results):
        assert res.get("ok"), f"rank {r}: {res.get('error')}\n{res.get('traceback', '')}"


def _expect(name, ws, r):
    """The value `name` must have on rank r, from every rank's inputs (numpy, float64)."""
    xs = [_rank_tensor(q, (4, 6), 1).double().numpy() for q in range(ws)]
    bigs = [_rank_tensor(q, (2 * ws, 3), 2).double().numpy() for q in range(ws)]
    total, big = np.sum(xs, axis=0), np.sum(bigs, axis=0)
    return {
        "all_reduce": total, "all_reduce_max": np.max(xs, axis=0),
        "all_reduce_avg": total / ws, "broadcast": xs[ws - 1],
        "all_gather_into_tensor": np.concatenate(xs), "all_gather": np.stack(xs),
        "reduce_scatter_tensor": big[2 * r:2 * r + 2], "reduce_scatter": big[2 * r:2 * r + 2],
        "all_to_all_single": np.concatenate([b[2 * r:2 * r + 2] for b in bigs]),
        "all_to_all_uneven": np.concatenate(
            [_rank_tensor(s, ((s + 1) * ws, 2), 3).double().numpy()[r * (s + 1):(r + 1) * (s + 1)]
             for s in range(ws)]),
        "send_recv": xs[(r - 1) % ws], "funcol_all_reduce": total,
        "funcol_all_gather": np.concatenate(xs), "funcol_reduce_scatter": big[2 * r:2 * r + 2],
    }[name]


NAMES = ["all_reduce", "all_reduce_max", "all_reduce_avg", "broadcast", "all_gather_into_tensor",
         "all_gather", "reduce_scatter_tensor", "reduce_scatter", "all_to_all_single",
         "all_to_all_uneven", "send_recv", "funcol_all_reduce", "funcol_all_gather",
         "funcol_reduce_scatter"]


def _check_collectives(results):
    ws = len(results)
    for r, res in enumerate(results):
        for name in NAMES:
            np.testing.assert_allclose(res[f"cc/{name}"].double().numpy(), _expect(name, ws, r),
                                       rtol=1e-6, atol=1e-6, err_msg=f"rank {r}: {name}")


def test_collectives_match_numpy(world):
    results, _, _ = world
    _ok(results)
    _check_collectives(results)


def test_each_rank_addresses_its_core_by_local_rank(world):
    results, _, _ = world
    dev = _dev()
    for r, res in enumerate(results):
        assert res["alias"] == f"{dev}:0"  # set_device(r) and "trn:r" name rank r's core
        assert f"{dev}:{r + 1}: this process simulates one NeuronCore" in res["other_index"]


def _dev():
    import trnsim.backend

    return trnsim.backend.runtime.name


def test_collective_time_comes_from_the_topology_and_every_clock_agrees(world):
    import trnsim.backend

    from trnsim.timing.collectives import plan_collective
    from trnsim.topology import default_topology, load_topology

    results, _, _ = world
    clocks = {float(r["cc/clock"]) for r in results}
    assert len(clocks) == 1, "after a barrier every rank's clock is the same"
    chip = trnsim.backend.runtime.chip
    topo = load_topology(default_topology(chip))
    api, nbytes, algo, start, end, group = results[0]["cc/events"][0]
    assert (api, nbytes) == ("all_reduce", 4 * 6 * 4)
    plan = plan_collective("all_reduce", nbytes, tuple(group), topo, chip.lnc_default)
    assert algo == plan.algorithm
    assert end - start == pytest.approx(plan.total_ns)
    assert results[1]["cc/events"][0][3:5] == (start, end)


def _compare(results, section, mode):
    rtol, atol = TOL[mode]
    for r, res in enumerate(results):
        trn, cpu = res[f"{section}/trn/losses"], res[f"{section}/cpu/losses"]
        if mode == "reference" and section != "fsdp":
            assert torch.equal(trn, cpu), f"rank {r} {section}: {trn} vs {cpu}"
        else:  # FSDP2: the gradients' reduction rounds differently (see the module docstring)
            torch.testing.assert_close(trn, cpu, rtol=rtol or 1e-6, atol=0)
        keys = [k for k in res if k.startswith(f"{section}/trn/") and not k.endswith("losses")]
        assert keys
        for k in keys:
            torch.testing.assert_close(res[k].float(), res[k.replace("/trn/", "/cpu/")].float(),
                                       rtol=0, atol=atol, msg=f"rank {r} {k}")


@pytest.mark.parametrize("section", ["ddp", "fsdp", "tp"])
def test_steps_equal_cpu_gloo(world, section):
    results, mode, _ = world
    _compare(results, section, mode)


def test_llama_debug_model_trains_3_fsdp2_steps(world):
    results, _, _ = world
    losses = results[0]["fsdp/trn/losses"]
    assert len(losses) == 3 and losses[2] < losses[0] - 1.0, losses
    for res in results[1:]:
        assert res["fsdp/trn/losses"].shape == losses.shape


def test_step_summary_and_merged_timeline(world):
    from trnsim.trace import trace_from_perfetto

    results, mode, out = world
    s = json.loads(results[0]["fsdp/summary"])
    assert s == json.loads(results[1]["fsdp/summary"]), "every rank gets the same summary"
    assert s["bound"] in ("compute", "communication", "waiting")
    for r in s["ranks"]:  # reference mode runs PyTorch's CPU kernels: no device compute time
        assert 0 < r["collective_ns"] <= r["step_ns"]
        assert (r["compute_ns"] > 0) if mode == "kernel" else (r["compute_ns"] == 0)
        assert r["exposed_ns"] == pytest.approx(r["collective_ns"])  # eager: nothing overlaps
    assert set(s["exposed_by_collective_ns"]) >= {"all_gather_into_tensor",
                                                  "reduce_scatter_tensor"}
    path = out / "fsdp_step.pftrace"
    assert path.exists(), "rank 0 wrote the merged timeline"
    trace = trace_from_perfetto(str(path))
    names = {n for n, _ in trace.tracks}
    for r in range(len(results)):  # reference mode launches no kernels: no Kernels rows
        assert f"rank{r} Collectives" in names
        assert (f"rank{r} Kernels" in names) == (mode == "kernel")
    colls = [s for s in trace.slices if s.track.endswith("Collectives")]
    assert {s.name for s in colls} >= {"all_gather_into_tensor", "reduce_scatter_tensor"}


def test_mismatched_shapes_and_a_skipped_collective_are_errors_naming_them(world):
    results, _, _ = world
    last = len(results) - 1
    for r, res in enumerate(results):
        assert "rank 0 called torch.distributed.all_reduce([3] float32)" in res["mismatch"], res
        assert "rank 1 called torch.distributed.all_reduce([5] float32)" in res["mismatch"]
        assert "dist_worker.py" in res["mismatch"]
        if r == last:
            assert res["skipped"] == "yes"
        else:
            msg = res["deadlock"]
            assert "torch.distributed.all_reduce([4] float32)" in msg and "timed out" in msg
            assert f"rank {last} never reached it (its last collective was " \
                   "torch.distributed.barrier" in msg, msg


def test_a_world_size_mismatch_is_an_error_on_every_rank(tmp_path):
    results = launch("errors", 2, tmp_path, {"TEST_WORLD_SIZE_AS": "3",
                                             "TRNSIM_DIST_TIMEOUT": "20"}, timeout_s=120)
    for res in results:
        assert "world_size=3" in res["error"] and "world_size=2" in res["error"], res["error"]
        assert "every rank needs the same WORLD_SIZE" in res["error"]


def test_a_world_larger_than_the_topology_is_refused():
    from trnsim.backend.distributed.state import DistributedError, DistState

    from trnsim.topology import load_topology

    st = DistState(load_topology("trn2-instance"), 2)
    st.check_world_size(64, "trn2")
    with pytest.raises(DistributedError, match=r"world_size 65 does not fit trn2-instance: 16 "
                       r"trn2 chips x 4 logical NeuronCores at LNC=2 = 64 ranks"):
        st.check_world_size(65, "trn2")


@pytest.mark.parametrize("n", [64, pytest.param(256, marks=pytest.mark.slow)])
def test_a_virtual_world_times_n_ranks_in_one_process(tmp_path, n):
    """FSDP2 shards every parameter n ways at init (n empty shards each): 64 ranks keep the
    default tier fast."""
    import trnsim.backend

    from trnsim.timing.collectives import plan_collective
    from trnsim.topology import default_topology, load_topology

    (res,) = launch("virtual", 1, tmp_path, {"TRNSIM_MODE": "reference",
                                             "TEST_VIRTUAL_WORLD": str(n)}, timeout_s=180)
    _ok([res])
    api, nbytes, _, start, end, ranks = res["virtual/events"][0]
    assert (api, nbytes, ranks) == ("all_reduce", 4096, n)
    chip = trnsim.backend.runtime.chip
    plan = plan_collective("all_reduce", 4096, tuple(range(n)),
                           load_topology(default_topology(chip)), chip.lnc_default)
    assert end - start == pytest.approx(plan.total_ns)
    torch.testing.assert_close(res["virtual/all_reduce"], torch.ones(1024))  # timing only
    apis = {e[0] for e in res["virtual/events"]}
    assert {"all_gather_into_tensor", "reduce_scatter_tensor"} <= apis
    assert res["virtual/summary"]["ranks"][0]["collective_ns"] > 0 < res["virtual/step_ns"]


@pytest.mark.slow
def test_collectives_on_8_ranks_match_numpy(tmp_path):
    results = launch("collectives", 8, tmp_path, {"TRNSIM_MODE": "reference"}, timeout_s=400)
    _ok(results)
    _check_collectives(results)
