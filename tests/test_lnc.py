"""LNC2 launches: two programs on cores 0 and 1 sharing HBM, run cooperatively (one at a time,
switching at core_barrier / sendrecv / end and every trnsim.nki.lnc.QUANTUM instructions):
values, record, determinism, deadlocks."""

from __future__ import annotations

import linecache
import pathlib
import runpy

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from source_paths import assert_no_internal_path

from trnsim.errors import ConstraintError, KernelError, SimulationWarning
from trnsim.nki.runner import run_kernel

ROOT = pathlib.Path(__file__).resolve().parents[1]
P = 128  # partitions per tile


def statement_at(filename: str, lineno: int) -> str:
    """The source of the statement starting at `lineno` (up to balanced parentheses)."""
    text, depth, n = "", 0, lineno
    while True:
        line = linecache.getline(filename, n)
        text += line
        depth += line.count("(") - line.count(")")
        if depth <= 0 or not line:
            return text
        n += 1


def assert_at_user_line(exc: pytest.ExceptionInfo) -> None:
    loc = exc.value.loc
    assert loc is not None
    assert loc.filename == __file__
    assert "# ERR" in statement_at(loc.filename, loc.lineno)
    assert_no_internal_path(str(exc.value))


def half_add(a, b):
    """Each program adds its half of the rows (program_id picks the half)."""
    rows, cols = a.shape
    out = nl.ndarray((rows, cols), a.dtype, buffer=nl.shared_hbm)
    half = rows // nl.num_programs()
    r0 = nl.program_id(0) * half
    at = nl.ndarray((half, cols), a.dtype, buffer=nl.sbuf)
    bt = nl.ndarray((half, cols), a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=at, src=a[r0 : r0 + half, :])
    nisa.dma_copy(dst=bt, src=b[r0 : r0 + half, :])
    nisa.tensor_tensor(dst=at, data1=at, data2=bt, op=nl.add)
    nisa.dma_copy(dst=out[r0 : r0 + half, :], src=at)
    return out


@pytest.mark.parametrize("chip", ["trn2", "trn3"])
def test_lnc2_each_core_processes_half_the_rows(rng, chip):
    a = rng.standard_normal((2 * P, 64)).astype(np.float32)
    b = rng.standard_normal((2 * P, 64)).astype(np.float32)
    kr = run_kernel(half_add, (a, b), {}, chip=chip, lnc=2)
    np.testing.assert_array_equal(kr.outputs, a + b)
    assert {i.core for i in kr.program} == {0, 1}
    per_core = {c: [i.opcode for i in kr.program if i.core == c] for c in (0, 1)}
    assert per_core[0] == per_core[1] == ["dma_copy", "dma_copy", "tensor_tensor", "dma_copy"]


def test_example_lnc2_add_runs_standalone():
    runpy.run_path(str(ROOT / "examples" / "ga" / "lnc2_add.py"), run_name="__main__")


def test_simulate_kernel_2_and_program_identity():
    def kernel(x):
        out = nl.ndarray((1, 2), nl.int32, buffer=nl.shared_hbm)
        r = nisa.register_alloc(nl.program_id(0) * 10 + nl.num_programs())
        nisa.register_store(out[0:1, nl.program_id(0) : nl.program_id(0) + 1], r)
        return out

    out = nki.simulate(nki.jit(kernel)[2])(np.zeros(1, np.float32))
    np.testing.assert_array_equal(out, [[2, 12]])


def test_private_hbm_is_per_core_and_shared_hbm_is_shared():
    def kernel(x):
        shared = nl.ndarray((1, 2), nl.float32, buffer=nl.shared_hbm)
        private = nl.ndarray((1, 2), nl.float32, buffer=nl.private_hbm)
        pid = nl.program_id(0)
        t = nl.ndarray((1, 2), nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=t, value=float(pid + 1))
        nisa.dma_copy(dst=private, src=t)
        nisa.dma_copy(dst=shared[0:1, pid : pid + 1], src=private[0:1, 0:1])
        return shared

    out = nki.simulate(nki.jit(kernel)[2])(np.zeros(1, np.float32))
    np.testing.assert_array_equal(out, [[1.0, 2.0]])


# ---------------------------------------------------------------- sendrecv
def exchange(x):
    """Program p sends its half to the peer and receives the peer's half: out = swapped halves."""
    rows, cols = x.shape
    half = rows // 2
    pid = nl.program_id(0)
    peer = 1 - pid
    mine = nl.ndarray((half, cols), x.dtype, buffer=nl.sbuf)
    theirs = nl.ndarray((half, cols), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=mine, src=x[pid * half : (pid + 1) * half, :])
    nisa.sendrecv(src=mine, dst=theirs, send_to_rank=peer, recv_from_rank=peer, pipe_id=0)
    # the send buffer may be reused right away: the exchange has completed on both sides
    nisa.memset(dst=mine, value=-1.0)
    out = nl.ndarray((rows, cols), x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out[pid * half : (pid + 1) * half, :], src=theirs)
    return out


def test_sendrecv_exchanges_halves(rng):
    x = rng.standard_normal((64, 32)).astype(np.float32)
    kr = run_kernel(exchange, (x,), {}, chip="trn2", lnc=2)
    np.testing.assert_array_equal(kr.outputs, np.concatenate([x[32:], x[:32]]))
    sr = [i for i in kr.program if i.opcode == "sendrecv"]
    assert sorted(i.core for i in sr) == [0, 1]
    assert {i.attrs["sync_id"] for i in sr} == {"sendrecv:0:0"}
    for i in sr:  # each reads the peer's SBUF tile
        peer_src = next(o for o in i.reads if o.name == "peer_src")
        assert peer_src.region.core == 1 - i.core


def test_sendrecv_over_gpsimd_dma(rng):
    x = rng.standard_normal((8, 256)).astype(np.float32)  # 1024 bytes per partition: the limit

    def kernel(a):
        pid = nl.program_id(0)
        s = nl.ndarray((4, 256), nl.float32, buffer=nl.sbuf)
        d = nl.ndarray((4, 256), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=a[pid * 4 : pid * 4 + 4, :])
        nisa.sendrecv(
            src=s,
            dst=d,
            send_to_rank=1 - pid,
            recv_from_rank=1 - pid,
            pipe_id=3,
            dma_engine=nisa.dma_engine.gpsimd_dma,
        )
        out = nl.ndarray((8, 256), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out[pid * 4 : pid * 4 + 4, :], src=d)
        return out

    kr = run_kernel(kernel, (x,), {}, chip="trn3", lnc=2)
    np.testing.assert_array_equal(kr.outputs, np.concatenate([x[4:], x[:4]]))
    assert {i.engine for i in kr.program if i.opcode == "sendrecv"} == {"gpsimd"}


def test_lnc2_runs_are_bit_identical(rng):
    x = rng.standard_normal((64, 32)).astype(np.float32)
    runs = [run_kernel(exchange, (x,), {}, chip="trn2", lnc=2) for _ in range(3)]
    for r in runs[1:]:
        np.testing.assert_array_equal(r.outputs.view(np.uint32), runs[0].outputs.view(np.uint32))
        assert [(i.opcode, i.core, i.engine, i.attrs) for i in r.program] == [
            (i.opcode, i.core, i.engine, i.attrs) for i in runs[0].program
        ]


# ---------------------------------------------------------------- core_barrier
def barrier_kernel(x, use_barrier=True):
    """Each core writes its half of a shared scratch tensor, then reads the other half."""
    rows, cols = x.shape
    half = rows // 2
    pid = nl.program_id(0)
    scratch = nl.ndarray((rows, cols), x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((half, cols), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[pid * half : (pid + 1) * half, :])
    nisa.dma_copy(dst=scratch[pid * half : (pid + 1) * half, :], src=t)
    if use_barrier:
        nisa.core_barrier(data=scratch, cores=(0, 1))
    other = 1 - pid
    nisa.dma_copy(dst=t, src=scratch[other * half : (other + 1) * half, :])
    out = nl.ndarray((rows, cols), x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out[pid * half : (pid + 1) * half, :], src=t)
    return out


def test_core_barrier_orders_the_cores(rng):
    x = rng.standard_normal((16, 8)).astype(np.float32)
    kr = run_kernel(barrier_kernel, (x,), {}, chip="trn2", lnc=2)
    np.testing.assert_array_equal(kr.outputs, np.concatenate([x[8:], x[:8]]))
    bars = [i for i in kr.program if i.opcode == "core_barrier"]
    assert sorted(i.core for i in bars) == [0, 1]
    assert all(i.engine == "gpsimd" and i.attrs["sync_id"] == "core_barrier:0" for i in bars)
    # without the barrier program 0 runs to its end first and reads never-written memory
    with pytest.warns(SimulationWarning, match="no core_barrier between them"):
        bad = run_kernel(
            lambda a: barrier_kernel(a, use_barrier=False), (x,), {}, chip="trn2", lnc=2
        )
    assert np.isnan(bad.outputs[:8]).all()


def test_barrier_on_one_core_only_deadlocks_at_the_users_line():
    def kernel(x):
        if nl.program_id(0) == 1:
            nisa.core_barrier(data=x, cores=(0, 1))  # ERR
        return x

    with pytest.raises(
        KernelError, match="deadlock: program 1 waits at core_barrier #0, but program 0 finished"
    ) as exc:
        nki.simulate(nki.jit(kernel)[2], chip="trn2")(np.zeros((2, 2), np.float32))
    assert_at_user_line(exc)


def test_barrier_against_sendrecv_deadlocks():
    def kernel(x):
        t = nl.ndarray((1, 2), nl.float32, buffer=nl.sbuf)
        d = nl.ndarray((1, 2), nl.float32, buffer=nl.sbuf)
        if nl.program_id(0) == 0:
            nisa.core_barrier(data=x, cores=(0, 1))  # ERR
        else:
            nisa.sendrecv(src=t, dst=d, send_to_rank=0, recv_from_rank=0, pipe_id=0)
        return x

    with pytest.raises(KernelError, match=r"waits at sendrecv #0 on pipe_id 0 \(test_lnc.py"):
        nki.simulate(nki.jit(kernel)[2], chip="trn2")(np.zeros((2, 2), np.float32))


def test_error_in_one_program_stops_the_launch():
    def kernel(x):
        if nl.program_id(0) == 1:
            t = nl.ndarray((4, 4), nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x)  # ERR
        nisa.core_barrier(data=x, cores=(0, 1))
        return x

    with pytest.raises(ConstraintError, match="element counts must match") as exc:
        nki.simulate(nki.jit(kernel)[2], chip="trn2")(np.zeros((2, 2), np.float32))
    assert_at_user_line(exc)


# ---------------------------------------------------------------- rules
def _lnc2_error(body, chip="trn2"):
    with pytest.raises(ConstraintError) as exc:
        nki.simulate(nki.jit(body)[2], chip=chip)(np.zeros((2, 256), np.float32))
    assert_at_user_line(exc)
    return str(exc.value)


def test_core_barrier_only_cores_0_1():
    def kernel(x):
        nisa.core_barrier(data=x, cores=(0, 2))  # ERR

    assert "only cores=(0, 1)" in _lnc2_error(kernel)


def test_core_barrier_data_must_be_shared_hbm():
    def kernel(x):
        p = nl.ndarray((2, 2), nl.float32, buffer=nl.private_hbm)
        nisa.core_barrier(data=p, cores=(0, 1))  # ERR

    assert "nl.shared_hbm" in _lnc2_error(kernel)


def test_core_barrier_data_in_sbuf_is_rejected():
    def kernel(x):
        t = nl.ndarray((2, 2), nl.float32, buffer=nl.sbuf)
        nisa.core_barrier(data=t, cores=(0, 1))  # ERR

    assert "shared HBM, got sbuf" in _lnc2_error(kernel)


def test_sendrecv_to_own_rank():
    def kernel(x):
        t = nl.ndarray((1, 2), nl.float32, buffer=nl.sbuf)
        d = nl.ndarray((1, 2), nl.float32, buffer=nl.sbuf)
        pid = nl.program_id(0)
        nisa.sendrecv(
            src=t,
            dst=d,
            send_to_rank=pid,
            recv_from_rank=1 - pid,  # ERR
            pipe_id=0,
        )

    assert "own rank" in _lnc2_error(kernel)


def test_sendrecv_rank_out_of_range():
    def kernel(x):
        t = nl.ndarray((1, 2), nl.float32, buffer=nl.sbuf)
        nisa.sendrecv(src=t, dst=t, send_to_rank=2, recv_from_rank=1, pipe_id=0)  # ERR

    assert "allowed: 0 or 1" in _lnc2_error(kernel)


def test_sendrecv_overlapping_src_and_dst():
    def kernel(x):
        t = nl.ndarray((1, 2), nl.float32, buffer=nl.sbuf)
        pid = nl.program_id(0)
        nisa.sendrecv(
            src=t,
            dst=t,
            send_to_rank=1 - pid,
            recv_from_rank=1 - pid,  # ERR
            pipe_id=0,
        )

    assert "overlaps src" in _lnc2_error(kernel)


def test_sendrecv_gpsimd_dma_byte_limit():
    def kernel(x):
        t = nl.ndarray((1, 512), nl.float32, buffer=nl.sbuf)
        d = nl.ndarray((1, 512), nl.float32, buffer=nl.sbuf)
        pid = nl.program_id(0)
        nisa.sendrecv(
            src=t,
            dst=d,
            send_to_rank=1 - pid,
            recv_from_rank=1 - pid,  # ERR
            pipe_id=0,
            dma_engine=nisa.dma_engine.gpsimd_dma,
        )

    assert "at most 1024 bytes" in _lnc2_error(kernel)


def test_sendrecv_shape_mismatch_between_peers():
    def kernel(x):
        n = 2 if nl.program_id(0) == 0 else 4
        t = nl.ndarray((1, n), nl.float32, buffer=nl.sbuf)
        d = nl.ndarray((1, n), nl.float32, buffer=nl.sbuf)
        pid = nl.program_id(0)
        nisa.sendrecv(
            src=t,
            dst=d,
            send_to_rank=1 - pid,
            recv_from_rank=1 - pid,  # ERR
            pipe_id=0,
        )

    assert "same shape" in _lnc2_error(kernel)


def test_cross_core_hbm_race_without_a_barrier_is_reported_at_the_users_line(rng):
    """Without the barrier, core 1 reads the half of `scratch` that core 0 writes in the same
    interval: on hardware that is a race, so trnsim warns at the reading line (with the
    barrier, or when each core only touches its own rows, there is nothing to report)."""
    x = rng.standard_normal((16, 8)).astype(np.float32)
    with pytest.warns(SimulationWarning, match="no core_barrier between them") as seen:
        run_kernel(lambda a: barrier_kernel(a, use_barrier=False), (x,), {}, chip="trn2", lnc=2)
    races = [w for w in seen if "core_barrier" in str(w.message)]
    assert len(races) == 2  # core 0's read vs core 1's write, and core 0's write vs the read
    for w in races:  # at the later access's line, naming the earlier one's
        assert w.filename == __file__
        assert "scratch[" in linecache.getline(w.filename, w.lineno)
        assert "on core 1" in str(w.message) and "on core 0" in str(w.message)
        assert "test_lnc.py:" in str(w.message)
        assert "HBM bytes [" in str(w.message)  # `scratch` has no name= to show
    import warnings as _w

    with _w.catch_warnings():
        _w.simplefilter("error", SimulationWarning)
        run_kernel(barrier_kernel, (x,), {}, chip="trn2", lnc=2)
        run_kernel(half_add, (x, x), {}, chip="trn2", lnc=2)


def zero_then_fill(x, filler):
    """Core 1 zeroes `out` first thing; core 0 computes for `filler` instructions, then writes
    x into it. No barrier: a race, but on hardware core 1's zeroing is long done by then."""
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((rows, cols), x.dtype, buffer=nl.sbuf)
    if nl.program_id(0) == 1:
        nisa.memset(dst=t, value=0.0)
        nisa.dma_copy(dst=out, src=t)
    else:
        nisa.dma_copy(dst=t, src=x)
        for _ in range(filler):
            nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=0.0)
        nisa.dma_copy(dst=out, src=t)
    return out


def test_programs_run_abreast_so_an_early_write_on_one_core_lands_before_a_late_one(rng):
    """The baton moves every QUANTUM instructions: core 1's zeroing (its first two
    instructions) runs before core 0's write after 2 x QUANTUM others, as concurrently
    running cores would order them; still warned as a race."""
    from trnsim.nki import lnc

    x = rng.standard_normal((8, 16)).astype(np.float32)
    with pytest.warns(SimulationWarning, match="no core_barrier between them"):
        kr = run_kernel(zero_then_fill, (x,), {"filler": 2 * lnc.QUANTUM}, chip="trn2", lnc=2)
    np.testing.assert_array_equal(kr.outputs, x)
    order = [(i.core, i.opcode) for i in kr.program]
    assert order.index((1, "dma_copy")) < len(order) - 1 - order[::-1].index((0, "dma_copy"))
    with pytest.warns(SimulationWarning, match="no core_barrier between them"):
        again = run_kernel(zero_then_fill, (x,), {"filler": 2 * lnc.QUANTUM}, chip="trn2",
                           lnc=2)
    assert [(i.core, i.index) for i in again.program] == [(i.core, i.index) for i in kr.program]
