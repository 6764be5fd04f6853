"""The compiler's order (timing/reorder.py): queues sorted by data-ready time, dependencies,
no_reorder blocks and control fences kept; exact ticks on the tiny chip (1 GHz, DMA trigger 64
cycles + 1000 ns, semaphore 10 ns, engine latency 100)."""

from __future__ import annotations

import numpy as np
import pytest

import trnsim
from trnsim.timing.deps import ANTI
from trnsim.timing.reorder import asap_ticks, compiler_order, schedule
from trnsim.timing.scheduler import Scheduler

from .builders import ProgramBuilder, tile


def _iteration(b: ProgramBuilder, k: int) -> tuple[int, int, int]:
    """load -> exp -> store through tiles of their own (as rotated buffers give)."""
    src = tile("hbm", (128, 64), offset=k * 16384, name="src")
    t = tile("sbuf", (128, 64), offset=k * 1024, name="dst")
    u = tile("sbuf", (128, 64), offset=8192 + k * 1024, name="dst")
    out = tile("hbm", (128, 64), offset=(1 << 20) + k * 16384, name="dst")
    load = b.dma(t, src)
    exp = b.add("activation", "scalar", [tile("sbuf", (128, 64), offset=k * 1024, name="data")],
                [u], op="exp")  # fmt: skip
    store = b.dma(out, tile("sbuf", (128, 64), offset=8192 + k * 1024, name="src"))
    return load, exp, store


def test_next_load_is_issued_before_the_previous_store(tiny_chip, builder):
    (l0, e0, s0), (l1, _, _) = _iteration(builder, 0), _iteration(builder, 1)
    written = Scheduler(tiny_chip).run(builder.program)
    reordered = schedule(builder.program, tiny_chip)
    # As written the Sync queue is L0 S0 L1 S1: L1's trigger waits behind S0, which waits for
    # the exp (exp end + 10 ns semaphore), then issues after S0's 64-cycle trigger.
    assert written.start[s0] == written.end[e0] + 10
    assert written.start[l1] == written.start[s0] + 64
    # The compiler's order is L0 L1 S0 S1: L1 triggers right after L0's 64 cycles.
    assert (reordered.start[l0], reordered.start[l1]) == (0, 64)
    assert reordered.start[s0] == reordered.end[e0] + 10
    assert max(reordered.end) < max(written.end)


def test_a_program_already_in_order_is_timed_as_written(tiny_chip, builder):
    builder.dma(tile("sbuf", (128, 64)), tile("hbm", (128, 64)))
    builder.add("activation", "scalar", [tile("sbuf", (128, 64), name="data")],
                [tile("sbuf", (128, 64), offset=1024)], op="exp")  # fmt: skip
    written = Scheduler(tiny_chip).run(builder.program)
    reordered = schedule(builder.program, tiny_chip)
    assert (reordered.start, reordered.end) == (written.start, written.end)


def test_same_queue_war_keeps_its_order_without_waiting(tiny_chip, builder):
    """A reader then a writer of one tile on ScalarE: the writer may not pass the reader, but
    (engines read and write in issue order) it does not wait for the reader to complete."""
    x = tile("sbuf", (128, 512), name="data")
    late = builder.dma(tile("sbuf", (128, 512), offset=4096), tile("hbm", (128, 512)))
    fresh = tile("sbuf", (128, 512), offset=4096, name="data")
    reader = builder.add(
        "activation", "scalar", [fresh, x], [tile("sbuf", (128, 512), offset=8192)], op="exp"
    )
    other = tile("sbuf", (128, 512), offset=12288, name="data")
    writer = builder.add(
        "activation", "scalar", [other], [tile("sbuf", (128, 512), name="dst")], op="exp"
    )
    tl = schedule(builder.program, tiny_chip)
    assert tl.start[reader] > tl.end[late]  # the reader waits for the DMA...
    assert tl.start[writer] == tl.issue_end[reader]  # ...and the writer right behind it
    assert not [d for d in tl.deps[writer] if d[0] == reader]


def _random_program(seed: int) -> ProgramBuilder:
    rng = np.random.default_rng(seed)
    b = ProgramBuilder()
    sb = [tile("sbuf", (128, 256), offset=k * 1024, name="t") for k in range(6)]
    hbm = [tile("hbm", (128, 256), offset=k * 65536, name="h") for k in range(4)]
    for _ in range(40):
        r = rng.random()
        x, y = (int(v) for v in rng.choice(6, 2, replace=False))
        if r < 0.3:
            b.dma(sb[x], hbm[int(rng.integers(4))])
        elif r < 0.45:
            b.dma(hbm[int(rng.integers(4))], sb[x])
        elif r < 0.7:
            b.add("activation", "scalar", [sb[x]], [sb[y]], op="exp")
        elif r < 0.9:
            b.add("tensor_copy", "vector", [sb[x]], [sb[y]])
        else:
            b.add("tensor_copy", "gpsimd", [sb[x]], [sb[y]])
    return b


@pytest.mark.parametrize("seed", range(25))
def test_every_dependency_holds_in_the_compiler_order(tiny_chip, seed):
    program = _random_program(seed).program
    first = Scheduler(tiny_chip)
    first.prepare(program, full_deps=True)
    order = compiler_order(program, first.order_deps, asap_ticks(first), first.prepared.queue)
    position = {i: (q, p) for q, items in order.items() for p, i in enumerate(items)}
    first.reorder(order)
    sched, tl = first, first.run_prepared(program)  # raises if a queue never drains
    for i, deps in enumerate(first.order_deps):
        for j, kind, _ in deps:
            if position[j][0] == position[i][0]:
                assert position[j][1] < position[i][1], (seed, j, i)
            if program[j].engine == "dma" or position[j][0] != position[i][0]:
                done = sched._release[j] if kind == ANTI else tl.end[j]
                assert tl.start[i] >= done + 10, (seed, j, i, kind)
    assert schedule(program, tiny_chip).end == tl.end  # and it is deterministic


def test_full_dependencies_leave_the_written_order_unchanged():
    """Recording every WAR/WAW pair changes no time when nothing is reordered (library
    kernels on trn2)."""
    from trnsim.kernels import attention, matmul

    from trnsim.demo import demo_inputs

    for kernel, inputs in ((matmul.matmul, demo_inputs("matmul", 512)),
                           (attention.attention, demo_inputs("attention", 256))):  # fmt: skip
        prof = trnsim.profile(kernel, *inputs, chip="trn2", values=False)
        plain = Scheduler(prof.chip).run(prof.program)
        sched = Scheduler(prof.chip)
        sched.prepare(prof.program, full_deps=True)
        full = sched.run_prepared(prof.program)
        assert (full.start, full.end) == (plain.start, plain.end)


def _ga_loop_kernel(in_order: bool):
    import trnsim.nki.isa as nisa
    import trnsim.nki.language as nl

    def kernel(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        for k in nl.affine_range(x.shape[0] // 128):
            rows = slice(k * 128, (k + 1) * 128)
            t = nl.ndarray((128, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
            u = nl.ndarray((128, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x[rows, :])
            nisa.activation(dst=u, op=nl.exp, data=t)
            nisa.dma_copy(dst=out[rows, :], src=u)
        return out

    def kernel_in_order(x):
        import trnsim.nki.language as nl

        with nl.no_reorder():
            return kernel(x)

    return kernel_in_order if in_order else kernel


def test_no_reorder_block_keeps_program_order():
    x = np.broadcast_to(np.float32(0), (512, 512))
    free = trnsim.profile(_ga_loop_kernel(False), x, chip="trn2", values=False)
    kept = trnsim.profile(_ga_loop_kernel(True), x, chip="trn2", values=False)
    written = trnsim.profile(_ga_loop_kernel(False), x, chip="trn2", values=False, reorder=False)
    loads = [i for i, ins in enumerate(free.program) if ins.opcode == "dma_copy"][::2]
    stores = [i for i, ins in enumerate(free.program) if ins.opcode == "dma_copy"][1::2]
    assert free.start_ns(loads[1]) < free.start_ns(stores[0])  # prefetched
    assert kept.start_ns(loads[1]) > kept.start_ns(stores[0])  # as written
    assert kept.latency_ns == written.latency_ns > free.latency_ns


def test_control_instructions_are_fences(tiny_chip, builder):
    """Nothing moves across a register instruction: L1 stays behind S0."""
    _, _, s0 = _iteration(builder, 0)
    builder.add("register_move", "sync", dst="r0", src=1)
    l1, _, _ = _iteration(builder, 1)
    tl = schedule(builder.program, tiny_chip)
    assert tl.start[l1] > tl.start[s0]


def _b1_loop_kernel(in_order: bool):
    import contextlib

    import trnsim.compat.neuronxcc.nki as nki
    import trnsim.compat.neuronxcc.nki.compiler as ncc
    import trnsim.compat.neuronxcc.nki.language as nl

    @nki.jit
    def kernel(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        with ncc.no_reorder() if in_order else contextlib.nullcontext():
            for k in nl.affine_range(x.shape[0] // 128):
                t = nl.load(x[k * 128 : (k + 1) * 128, :])
                nl.store(out[k * 128 : (k + 1) * 128, :], value=nl.exp(t))
        return out

    return kernel


def test_beta1_no_reorder_block_keeps_program_order():
    x = np.broadcast_to(np.float32(0), (512, 512))
    free = trnsim.profile(_b1_loop_kernel(False), x, chip="trn2", values=False)
    kept = trnsim.profile(_b1_loop_kernel(True), x, chip="trn2", values=False)
    dmas = [i for i, ins in enumerate(kept.program) if ins.opcode == "dma_copy"]
    assert all(any(k == "no_reorder" for _, k, _ in kept.program[i].loops) for i in dmas)
    loads, stores = dmas[::2], dmas[1::2]
    assert free.start_ns(loads[1]) < free.start_ns(stores[0])
    assert kept.start_ns(loads[1]) > kept.start_ns(stores[0])
