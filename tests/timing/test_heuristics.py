"""NKI scheduling's priorities (timing/heuristics.py) on the tiny chip (1 GHz, engine latency
100, semaphore 10 ns, DMA trigger 64 cycles + 1000 ns): CRITICAL_PATH puts the head of a long
chain first, DMA_PREFETCH a DMA before compute on a shared queue; both keep dependencies."""

from __future__ import annotations

import pytest

from trnsim.timing.reorder import schedule
from trnsim.timing.scheduler import Scheduler

from .builders import ProgramBuilder, tile


def _copy(b: ProgramBuilder, src: int, dst: int) -> int:
    return b.add("tensor_copy", "vector", [tile("sbuf", (128, 512), offset=src, name="src")],
                 [tile("sbuf", (128, 512), offset=dst, name="dst")])


def _exp(b: ProgramBuilder, src: int, dst: int) -> int:
    return b.add("activation", "scalar", [tile("sbuf", (128, 512), offset=src, name="data")],
                 [tile("sbuf", (128, 512), offset=dst, name="dst")], op="exp")


def _two_chains(b: ProgramBuilder) -> tuple[int, int, list[int]]:
    """A lone vector copy, then a vector copy heading three dependent exps on ScalarE."""
    lone = _copy(b, 0, 4096)
    head = _copy(b, 8192, 12288)
    chain, prev = [], 12288
    for k in range(3):
        chain.append(_exp(b, prev, 16384 + 4096 * k))
        prev = 16384 + 4096 * k
    return lone, head, chain


def test_critical_path_issues_the_head_of_the_long_chain_first(tiny_chip, builder):
    lone, head, chain = _two_chains(builder)
    asap = schedule(builder.program, tiny_chip)
    crit = schedule(builder.program, tiny_chip, order="critical_path")
    # ASAP: both copies ready at 0, program order breaks the tie: the lone copy first, the
    # head 128 cycles later (the copy's II), the chain after it (+ 10 ns semaphore).
    assert (asap.start[lone], asap.start[head]) == (0, 128)
    assert asap.start[chain[0]] == asap.end[head] + 10
    # CRITICAL_PATH: the head has the longer tail (copy + three exps): it goes first.
    assert (crit.start[head], crit.start[lone]) == (0, 128)
    assert crit.start[chain[0]] == crit.end[head] + 10 == 238
    assert crit.end[chain[-1]] == 2094 < asap.end[chain[-1]] == 2222


def test_dma_prefetch_triggers_the_dma_before_compute_on_its_queue(tiny_chip, builder):
    act = _exp(builder, 0, 4096)
    load = builder.dma(tile("sbuf", (128, 512), offset=8192, name="dst"),
                       tile("hbm", (128, 512), offset=0, name="src"), queue_engine="scalar")
    use = _copy(builder, 8192, 16384)
    asap = schedule(builder.program, tiny_chip)
    pre = schedule(builder.program, tiny_chip, order="dma_prefetch")
    # Both ready at 0 on ScalarE's queue: ASAP keeps program order (the exp, then the trigger
    # after its 512-cycle II); DMA_PREFETCH triggers first and the exp follows its 64 cycles.
    assert (asap.start[act], asap.start[load]) == (0, 512)
    assert (pre.start[load], pre.start[act]) == (0, 64)
    assert pre.start[use] == pre.end[load] + 10
    assert pre.end[use] == 4899 < asap.end[use] == 5411


@pytest.mark.parametrize("order", ["critical_path", "dma_prefetch"])
def test_list_orders_keep_every_dependency(tiny_chip, builder, order):
    for k in range(4):  # load -> exp -> store chains whose tiles alias across iterations
        t = builder.dma(tile("sbuf", (128, 64), offset=(k % 2) * 1024, name="dst"),
                        tile("hbm", (128, 64), offset=k * 16384, name="src"))
        e = _exp(builder, (k % 2) * 1024, 8192 + (k % 2) * 1024)
        s = builder.dma(tile("hbm", (128, 64), offset=(1 << 20) + k * 16384, name="dst"),
                        tile("sbuf", (128, 64), offset=8192 + (k % 2) * 1024, name="src"))
        assert t < e < s
    tl = schedule(builder.program, tiny_chip, order=order)
    sched = Scheduler(tiny_chip)
    sched.prepare(builder.program, full_deps=True)
    for i, deps in enumerate(sched.order_deps):
        for j, _, _ in deps:
            assert tl.start[i] >= tl.start[j], (i, j)


def test_program_order_is_the_in_order_scheduler(tiny_chip, builder):
    _two_chains(builder)
    a = schedule(builder.program, tiny_chip, order="program")
    b = schedule(builder.program, tiny_chip, reorder=False)
    assert (a.start, a.end) == (b.start, b.end)


def test_an_unknown_order_is_refused(tiny_chip, builder):
    _two_chains(builder)
    with pytest.raises(ValueError, match="allowed: compiler, program, critical_path"):
        schedule(builder.program, tiny_chip, order="fastest")


@pytest.mark.parametrize("order", ["critical_path", "dma_prefetch"])
@pytest.mark.parametrize("seed", range(12))
def test_list_orders_drain_and_keep_dependencies_on_random_programs(tiny_chip, order, seed):
    """Random load / compute / store programs over aliasing tiles (test_reorder's): each
    queue drains (no deadlock) and every wait of the order holds, as for the compiler order."""
    from trnsim.timing.deps import ANTI

    from .test_reorder import _random_program

    program = _random_program(seed).program
    sched = Scheduler(tiny_chip)
    sched.prepare(program, full_deps=True)
    tl = schedule(program, tiny_chip, order=order)  # raises if a queue never drains
    for i, deps in enumerate(sched.order_deps):
        for j, kind, _ in deps:
            if tl.queue[j] == tl.queue[i]:
                assert tl.start[j] <= tl.start[i], (seed, j, i)
            elif kind != ANTI:
                assert tl.start[i] >= tl.end[j] + 10, (seed, j, i, kind)
    assert schedule(program, tiny_chip, order=order).end == tl.end  # deterministic


@pytest.mark.parametrize("order", ["critical_path", "dma_prefetch"])
def test_list_orders_time_a_two_core_barrier_kernel(order):
    """A core_barrier between two cores (a control fence on each): both list orders drain
    and keep each core's reads of the other's half after the barrier."""
    import numpy as np

    import trnsim.nki.isa as nisa
    import trnsim.nki.language as nl
    from trnsim.nki.runner import run_kernel

    def barrier_kernel(x):  # each core writes its half, then reads the other's
        rows, cols = x.shape
        half, pid = rows // 2, nl.program_id(0)
        scratch = nl.ndarray((rows, cols), x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((half, cols), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[pid * half:(pid + 1) * half, :])
        nisa.dma_copy(dst=scratch[pid * half:(pid + 1) * half, :], src=t)
        nisa.core_barrier(data=scratch, cores=(0, 1))
        other = 1 - pid
        nisa.dma_copy(dst=t, src=scratch[other * half:(other + 1) * half, :])
        out = nl.ndarray((rows, cols), x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out[pid * half:(pid + 1) * half, :], src=t)
        return out

    x = np.arange(16 * 8, dtype=np.float32).reshape(16, 8)
    run = run_kernel(barrier_kernel, (x,), {}, chip="trn2", lnc=2, values=False)
    tl = schedule(run.program, run.chip, order=order)
    bar_of = {i.core: i.index for i in run.program if i.opcode == "core_barrier"}
    assert sorted(bar_of) == [0, 1]
    for ins in run.program:  # a core's DMAs after its barrier in the text start after both
        if ins.opcode == "dma_copy" and ins.index > bar_of[ins.core]:
            assert tl.start[ins.index] >= max(tl.start[b] for b in bar_of.values())
    assert max(tl.end) == max(schedule(run.program, run.chip, order=order).end)
