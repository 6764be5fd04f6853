"""A finished launch goes when its last reference does: its HBM (a mapping of the chip's whole
capacity, and the host RAM of every chunk it touched) is released by reference counting, not
at some later full garbage collection. Before, NeuronCore <-> Device, memory <-> owner,
HBM <-> its allocator's free hook and a collective's calls <-> the world were reference
cycles: a loop of launches held every earlier launch's HBM until the collector ran (up to
7.6 TiB of address space in this suite)."""

from __future__ import annotations

import gc
import sys
import weakref
from pathlib import Path

import neuronxcc.nki as b1
import neuronxcc.nki.language as b1l
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

import trnsim.allocation as allocation
from trnsim.errors import ConstraintError, KernelError
from trnsim.nki.ranks import run_ranks
from trnsim.nki.runner import run_kernel

sys.path.insert(0, str(Path(__file__).parents[1] / "collectives"))
import cc_kernels as K


@pytest.fixture
def hbms(monkeypatch):
    """Weak references to every HBM made while the test runs, with the cyclic collector off
    (so only reference counting can free them)."""
    made: list[weakref.ref] = []
    init = allocation.HBM.__init__

    def tracked(self, *a, **kw):
        init(self, *a, **kw)
        made.append(weakref.ref(self))

    monkeypatch.setattr(allocation.HBM, "__init__", tracked)
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        yield made
    finally:
        if was:
            gc.enable()


def alive(made):
    return sum(1 for r in made if r() is not None)


def copy_ga(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=out, src=t)
    return out


def half_copy(x):
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), x.dtype, buffer=nl.shared_hbm)
    half = rows // nl.num_programs()
    r0 = nl.program_id(0) * half
    t = nl.ndarray((half, cols), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[r0:r0 + half, :])
    nisa.dma_copy(dst=out[r0:r0 + half, :], src=t)
    return out


@b1.jit
def copy_b1(x):
    out = b1l.ndarray(x.shape, dtype=x.dtype, buffer=b1l.shared_hbm)
    b1l.store(out, b1l.load(x))
    return out


X = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)


def test_a_current_api_launch_is_freed_with_its_result(hbms):
    kr = run_kernel(copy_ga, (X,), {})
    np.testing.assert_array_equal(kr.outputs, X)
    assert alive(hbms) == 1, "the result keeps its launch"
    del kr
    assert alive(hbms) == 0


def test_a_jit_call_keeps_nothing(hbms):
    np.testing.assert_array_equal(nki.jit(copy_ga)(X), X)
    np.testing.assert_array_equal(copy_b1(X), X)
    assert len(hbms) >= 2 and alive(hbms) == 0


def test_an_lnc2_launch_is_freed(hbms):
    x = np.arange(256 * 32, dtype=np.float32).reshape(256, 32)
    kr = run_kernel(half_copy, (x,), {}, chip="trn2", lnc=2)
    np.testing.assert_array_equal(kr.outputs, x)
    del kr
    assert alive(hbms) == 0


def test_a_multi_rank_launch_with_a_collective_is_freed(hbms):
    xs = [np.full((64, 32), r + 1, np.float32) for r in range(4)]
    run = run_ranks(K.all_reduce_kernel, [(x, 4) for x in xs], chip="trn2",
                    topology="trn2-instance")
    np.testing.assert_array_equal(run.outputs[3], np.full((64, 32), 10, np.float32))
    assert alive(hbms) == 4
    del run
    assert alive(hbms) == 0


def test_a_failed_multi_rank_launch_is_freed_with_its_error(hbms):
    from trnsim.nki import collectives as cc

    def kernel(x):
        s = K._private(x)
        d = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
        cc.all_reduce([s], [d], cc.ReplicaGroup([[0, 1]]), op=nl.subtract)
        return K._out(d)

    xs = [np.ones((64, 32), np.float32)] * 2
    with pytest.raises(ConstraintError, match=r"nl\.add, nl\.minimum or nl\.maximum") as exc:
        run_ranks(kernel, [(x,) for x in xs], chip="trn2", topology="trn2-instance")
    del exc
    assert len(hbms) == 2 and alive(hbms) == 0


def bad_ga(x):
    t = nl.ndarray((128, 64), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[0:64, :])  # shapes differ: refused
    return x


@b1.jit
def bad_b1(x):
    out = b1l.ndarray(x.shape, dtype=x.dtype, buffer=b1l.shared_hbm)
    b1l.store(out, b1l.load(x)[0:64, :])  # shapes differ: refused
    return out


@pytest.mark.parametrize("launch", ["ga", "b1"])
def test_a_failed_launch_is_freed_with_its_error(hbms, launch):
    def launch_it():
        return run_kernel(bad_ga, (X,), {}) if launch == "ga" else bad_b1(X)

    with pytest.raises(KernelError) as exc:
        launch_it()
    assert "shape" in str(exc.value)
    del exc
    assert hbms and alive(hbms) == 0


def test_a_deadlocked_multi_rank_launch_is_freed_with_its_error(hbms):
    from trnsim.nki import collectives as cc

    def kernel(x, skip):
        src = K._private(x)
        dst = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
        if not skip:  # rank 2 never arrives: ranks 0 and 1 wait for it
            cc.all_reduce([src], [dst], cc.ReplicaGroup([[0, 1, 2]]), nl.add)
        return K._out(src)

    xs = [np.ones((64, 32), np.float32)] * 3
    with pytest.raises(KernelError, match="deadlock") as exc:
        run_ranks(kernel, [(xs[0], False), (xs[1], False), (xs[2], True)], chip="trn2",
                  topology="trn2-instance")
    del exc
    assert len(hbms) == 3 and alive(hbms) == 0
