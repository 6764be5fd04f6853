"""Collective timing: the algorithms' phases on a topology, exact ticks of a ring all-reduce
on the tiny topology (analytic and as scheduled DMAs of an NKI launch), the Neuron runtime's
algorithm choice, and the multi-rank timeline and step metrics."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from trnsim.timing.collectives import plan_collective
from trnsim.topology import load_topology

TINY = Path(__file__).parents[1] / "data" / "tiny_topology.yaml"


@pytest.fixture(scope="module")
def tiny():
    return load_topology(TINY)


def test_ring_all_reduce_exact_ns_on_the_tiny_ring(tiny):
    """4 ranks, 4000 B: a reduce-scatter then an all-gather of 1000 B chunks, 2 x 3 steps.
    Each step: DMA trigger latency 1000 ns + one hop 100 ns + 1000 B over a 10 B/ns link
    = 1200 ns (the DMA engines, 4 x 10 B/ns, and HBM are faster)."""
    plan = plan_collective("all_reduce", 4000, (0, 1, 2, 3), tiny, 1)
    assert plan.algorithm == "ring" and plan.steps == 6
    assert [(p.repeat, p.latency_ns, p.transfer_ns) for p in plan.phases] == [
        (1, 1100.0, 100.0)] * 4 + [(2, 1100.0, 100.0)]
    assert plan.total_ns == 6 * 1200
    ag = plan_collective("all_gather", 1000, (0, 1, 2, 3), tiny, 1)
    assert ag.steps == 3 and ag.total_ns == 3 * 1200


def test_ring_all_reduce_exact_ticks_as_an_nki_launch(tiny):
    """The same all-reduce issued by an NKI kernel: each transfer is a DMA on the sender's
    engines, queue qCC, waiting for the transfer it forwards. A step = semaphore 10 ns +
    trigger latency 1000 + hop 100 + one descriptor per chunk it reads (10 ns each; the
    reduce-scatter's later steps read the partial and the sender's chunk, its last step also
    the receiver's) + 1000 B streamed at the link's 10 B/ns over 4 engines = 100 ns; the record
    before them takes MIN_II = 64 cycles on the Sync engine."""
    import sys

    sys.path.insert(0, str(Path(__file__).parents[1] / "collectives"))
    import cc_kernels as K

    from trnsim.multirank import profile_ranks

    xs = [np.full((10, 100), r, np.float32) for r in range(4)]
    prof = profile_ranks(K.all_reduce_kernel, [(x, 4) for x in xs], topology=TINY)
    np.testing.assert_array_equal(prof.outputs[2], np.full((10, 100), 6.0))
    spans = [s for s in prof.spans if s.api == "all_reduce"]
    assert len(spans) == 4 and len({(s.start_ns, s.end_ns) for s in spans}) == 1
    descriptors = [1, 2, 3, 1, 1, 1]
    steps = sum(1000 + 100 + 10 * d + 100 for d in descriptors) + 10 * 6
    assert spans[0].end_ns - spans[0].start_ns == 64 + steps
    queues = {t.queue for t in prof.dma_transfers if prof.program[t.index].opcode ==
              "cc_transfer"}
    assert queues == {"qCC"}


def test_algorithm_choice_follows_the_runtime():
    t = load_topology("trn2-instance")
    group = tuple(range(64))
    assert plan_collective("all_reduce", 256 << 10, group, t, 2).algorithm == "mesh"  # < 1 MB
    big = plan_collective("all_reduce", 512 << 20, group, t, 2)
    assert big.algorithm == "ring"
    assert plan_collective("all_to_all", 1 << 20, group, t, 2).algorithm == "direct"
    mesh = plan_collective("all_reduce", 512 << 20, group, t, 2, algorithm="mesh")
    assert big.total_ns < mesh.total_ns  # the ring wins for large messages


def test_a_ring_over_576_ranks_costs_one_phase_of_work():
    g2 = load_topology("trn3-ultraserver-gen2")
    plan = plan_collective("reduce_scatter", 1 << 20, tuple(range(576)), g2, 2,
                           algorithm="ring")
    assert plan.steps == 575 and len(plan.phases) == 3


def test_link_bandwidth_bounds_an_inter_chip_ring(tiny):
    slow = load_topology(TINY, levels__ring__link_gbps=5)
    a = plan_collective("all_gather", 10_000, (0, 1, 2, 3), tiny, 1)
    b = plan_collective("all_gather", 10_000, (0, 1, 2, 3), slow, 1)
    assert b.phases[0].bound == "link:ring"
    assert b.total_ns - a.total_ns == pytest.approx(3 * 10_000 / 10)


def test_multi_rank_timeline_and_step_metrics(tmp_path):
    import sys

    sys.path.insert(0, str(Path(__file__).parents[1] / "collectives"))
    import cc_kernels as K

    from trnsim.multirank import profile_ranks
    from trnsim.trace import trace_from_perfetto

    xs = [np.random.default_rng(r).standard_normal((128, 64)).astype(np.float32)
          for r in range(4)]
    prof = profile_ranks(K.all_reduce_kernel, [(x, 4) for x in xs], chip="trn2",
                         topology="trn2-instance")
    step = prof.step()
    assert [r.rank for r in step.ranks] == [0, 1, 2, 3]
    for r in step.ranks:
        assert 0 < r.exposed_ns <= r.collective_ns <= r.step_ns
    assert step.bound in ("compute", "communication", "waiting")
    assert "all_reduce" in step.collectives and "bound by" in step.text()
    path = str(tmp_path / "ranks.pftrace")
    prof.save(path)
    trace = trace_from_perfetto(path)
    names = {n for n, _ in trace.tracks}
    for r in range(4):
        assert f"CC-core(rank{r})" in names and f"qCC(rank{r} nc0)" in names
    cc = [s for s in trace.slices if s.track.startswith("CC-core")]
    assert len(cc) == 4 and all(s.name == "all_reduce" for s in cc)
