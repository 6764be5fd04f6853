"""nki.collectives on multi-rank launches: every rank's values against numpy (float64 where
it sums), on 2, 4 and 8 ranks; the documented rules as errors at the user's line."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from source_paths import assert_no_internal_path

sys.path.insert(0, str(Path(__file__).parent))
import cc_kernels as K

from trnsim.errors import ConstraintError, KernelError
from trnsim.nki.ranks import run_ranks

RANKS = [2, 4, 8]


def _inputs(n, shape=(64, 32), seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(dtype) for _ in range(n)]


def _run(kernel, per_rank, **kw):
    kw.setdefault("chip", "trn2")
    kw.setdefault("topology", "trn2-instance")
    return run_ranks(kernel, per_rank, **kw).outputs


@pytest.mark.parametrize("n", RANKS)
def test_all_reduce_sum_min_max(n):
    from trnsim.nki import language as nl

    xs = _inputs(n)
    ref = np.sum(np.stack(xs).astype(np.float64), axis=0)
    outs = _run(K.all_reduce_kernel, [(x, n) for x in xs])
    for r in range(n):
        np.testing.assert_allclose(outs[r], ref, rtol=1e-5, atol=1e-5)
        assert np.array_equal(outs[r], outs[0]), "every rank gets the same bits"
    for op, fn in ((nl.maximum, np.max), (nl.minimum, np.min)):
        outs = _run(K.all_reduce_kernel, [(x, n, op) for x in xs])
        np.testing.assert_array_equal(outs[n - 1], fn(np.stack(xs), axis=0))


@pytest.mark.parametrize("n", RANKS)
def test_all_gather_reduce_scatter_all_to_all(n):
    xs = _inputs(n, (8 * n, 16), seed=n)
    stack = np.stack(xs)
    outs = _run(K.all_gather_kernel, [(x, n) for x in xs])
    for r in range(n):
        np.testing.assert_array_equal(outs[r], np.concatenate(xs))
    outs = _run(K.reduce_scatter_kernel, [(x, n) for x in xs])
    total = stack.astype(np.float64).sum(axis=0)
    for r in range(n):
        np.testing.assert_allclose(outs[r], total[8 * r:8 * (r + 1)], rtol=1e-5, atol=1e-5)
    outs = _run(K.all_to_all_kernel, [(x, n) for x in xs])
    for r in range(n):
        np.testing.assert_array_equal(outs[r], np.concatenate([x[8 * r:8 * (r + 1)] for x in xs]))


@pytest.mark.parametrize("n", RANKS)
def test_permutes_and_rank_ids(n):
    xs, ys = _inputs(n, seed=1), _inputs(n, seed=2)
    outs = _run(K.permute_kernel, [(x, n) for x in xs])
    for r in range(n):
        np.testing.assert_array_equal(outs[r], xs[(r - 1) % n])
    outs = _run(K.implicit_kernel, [(x, y, n) for x, y in zip(xs, ys, strict=True)])
    for r in range(n):
        prev = (r - 1) % n
        np.testing.assert_array_equal(outs[r][0], xs[prev])
        np.testing.assert_array_equal(outs[r][1], np.maximum(xs[prev], ys[prev]))
        assert int(outs[r][2][0, 0]) == prev  # iteration 1 processes the predecessor's data
    ids = _run(K.rank_kernel, [(xs[0],) for _ in range(n)])
    assert [int(i[0, 0]) for i in ids] == list(range(n))


def test_sbuf_tiles_and_bf16():
    import ml_dtypes

    n = 4
    xs = _inputs(n, (128, 64), seed=3, dtype=ml_dtypes.bfloat16)
    outs = _run(K.sbuf_all_reduce_kernel, [(x, n) for x in xs])
    ref = np.sum(np.stack(xs).astype(np.float64), axis=0)
    np.testing.assert_allclose(outs[0][0].astype(np.float64), ref, rtol=2e-2, atol=2e-2)
    np.testing.assert_array_equal(outs[2][1], np.concatenate(xs, axis=1))


def test_all_to_all_v_counts_and_displacements():
    n = 4
    # rank s sends s+1 elements to every rank d, from displacement d*(s+1)
    xs = [np.arange(16, dtype=np.float32) + 100 * s for s in range(n)]
    metas = []
    for s in range(n):
        counts = [s + 1] * n
        displs = [d * (s + 1) for d in range(n)]
        metas.append(np.array([counts, displs], dtype=np.uint32))
    outs = _run(K.all_to_all_v_kernel, [(x, m, n) for x, m in zip(xs, metas, strict=True)])
    for d in range(n):
        want = np.concatenate([xs[s][d * (s + 1):d * (s + 1) + s + 1] for s in range(n)])
        np.testing.assert_array_equal(outs[d][:want.size], want)


def test_lnc2_ranks_issue_collectives_together():
    from trnsim.nki import collectives as cc
    from trnsim.nki import isa as nisa
    from trnsim.nki import language as nl

    def kernel(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        cc.all_reduce([x], [out], cc.ReplicaGroup([[0, 1, 2, 3]]), nl.add)
        nisa.core_barrier(out, (0, 1))
        return out

    xs = _inputs(4)
    outs = run_ranks(kernel, [(x,) for x in xs], chip="trn2", topology="trn2-instance",
                     lnc=2).outputs
    np.testing.assert_allclose(outs[3], np.sum(xs, axis=0), rtol=1e-5, atol=1e-5)


def test_lnc2_cores_gather_their_own_sbuf_tiles():
    """At LNC=2 each core passing its own SBUF tiles makes a collective per core, among the
    same-numbered cores of the ranks (each core gathers its row block of every rank's input);
    the launch also times."""
    from trnsim.nki import collectives as cc
    from trnsim.nki import isa as nisa
    from trnsim.nki import language as nl

    n, rows, k = 4, 64, 32

    def kernel(x):
        core = nl.program_id(0)
        out = nl.ndarray((2 * rows, k * n), x.dtype, buffer=nl.shared_hbm)
        src = nl.ndarray((rows, k), x.dtype, buffer=nl.sbuf)
        dst = nl.ndarray((rows, k * n), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=src, src=x[core * rows:(core + 1) * rows, :])
        cc.all_gather([src], [dst], cc.ReplicaGroup([list(range(n))]), collective_dim=1)
        nisa.dma_copy(dst=out[core * rows:(core + 1) * rows, :], src=dst)
        return out

    xs = _inputs(n, shape=(2 * rows, k), seed=5)
    run = run_ranks(kernel, [(x,) for x in xs], chip="trn2", topology="trn2-instance", lnc=2)
    want = np.concatenate(xs, axis=1)
    for r in range(n):
        np.testing.assert_array_equal(run.outputs[r], want)
    assert len(run.world.calls) == 2  # one collective per core
    spans = run.timing().spans  # each rank busy with two all_gathers, one per core
    assert sorted(s.rank for s in spans) == sorted(list(range(n)) * 2)
    assert all(s.end_ns > s.start_ns for s in spans)


def test_keyword_arguments_per_rank():
    """kwargs=callable(rank): each rank its own keyword arguments (as harnesses that keep one
    input dict per rank pass them), against numpy; a plain dict is shared by every rank."""
    n = 4
    xs = _inputs(n, seed=3)
    outs = run_ranks(K.all_gather_kernel, lambda r: (), lambda r: {"x": xs[r], "n": n},
                     ranks=n, chip="trn2", topology="trn2-instance").outputs
    for r in range(n):
        np.testing.assert_array_equal(outs[r], np.concatenate(xs))
    shared = run_ranks(K.all_reduce_kernel, [(x,) for x in xs], {"n": n}, chip="trn2",
                       topology="trn2-instance").outputs
    ref = np.sum(np.stack(xs).astype(np.float64), axis=0)
    np.testing.assert_allclose(shared[1], ref, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- errors


def _error(kernel, n=2, **kw):
    xs = _inputs(n)
    with pytest.raises(KernelError) as ei:
        _run(kernel, [(x,) for x in xs], **kw)
    assert_no_internal_path(str(ei.value))
    return ei.value


def test_mismatched_shapes_name_both_ranks():
    from trnsim.nki import collectives as cc
    from trnsim.nki import language as nl

    def kernel(x):
        r = cc.rank_id()
        del r
        src = K._private(x)
        dst = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
        cc.all_reduce([src], [dst], cc.ReplicaGroup([[0, 1]]), nl.add)
        return K._out(dst)

    xs = [np.ones((64, 32), np.float32), np.ones((64, 16), np.float32)]
    with pytest.raises(ConstraintError, match=r"rank 1's srcs\[0\] is \[64, 16\] float32.*"
                       r"rank 0's is \[64, 32\] float32") as ei:
        _run(kernel, [(x,) for x in xs])
    assert ei.value.loc is not None and ei.value.loc.filename == __file__


def test_a_rank_that_skips_a_collective_is_a_deadlock_naming_it():
    from trnsim.nki import collectives as cc
    from trnsim.nki import language as nl

    def kernel(x, skip):
        src = K._private(x)
        dst = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
        if not skip:
            cc.all_reduce([src], [dst], cc.ReplicaGroup([[0, 1, 2]]), nl.add)
        else:
            nisa_copy = dst
            del nisa_copy
        return K._out(src)

    xs = _inputs(3)
    with pytest.raises(KernelError, match=r"deadlock: rank 0 waits at "
                       r"nki.collectives.all_reduce \(collective #0 of rank list \[0, 1, 2\]\)"
                       r".*rank 2 finished without reaching it"):
        _run(kernel, [(xs[0], False), (xs[1], False), (xs[2], True)])


@pytest.mark.parametrize(("body", "match"), [
    ("cc.all_gather([s], [d2], g, collective_dim=1)", "only 0 for HBM tensors"),
    ("cc.all_reduce([s], [d], g, op=nl.subtract)",
     "nl.add, nl.minimum or nl.maximum"),
    ("cc.all_reduce([x], [d], g, nl.add)", "srcs must be on private HBM"),
    ("cc.all_reduce([t, t2], [t2, t], g, nl.add)", r"coalesced collective communication"),
    ("cc.all_reduce([s], [d], g, nl.add, priority=1)", "NeuronCore-v4\\+ only"),
    ("cc.all_reduce([s], [d], cc.ReplicaGroup([[0, 5]]), nl.add)", "launch has 2 ranks"),
    ("cc.all_to_all([t], [t2], g, collective_dim=0)", "tensors must reside on HBM"),
])
def test_documented_rules(body, match):
    from trnsim.nki import collectives as cc
    from trnsim.nki import language as nl

    src = f'''
def kernel(x):
    s = K._private(x)
    d = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
    d2 = nl.ndarray((x.shape[0], x.shape[1] * 2), x.dtype, buffer=nl.hbm)
    t = nl.ndarray((64, 32), x.dtype, buffer=nl.sbuf)
    t2 = nl.ndarray((64, 32), x.dtype, buffer=nl.sbuf)
    g = cc.ReplicaGroup([[0, 1]])
    if True:
        {body}
    return K._out(d)
'''
    ns = {"K": K, "cc": cc, "nl": nl}
    exec(compile(src, "<rule kernel>", "exec"), ns)
    xs = _inputs(2)
    with pytest.raises(ConstraintError, match=match):
        _run(ns["kernel"], [(x,) for x in xs])


def test_collectives_need_a_multi_rank_launch():
    from trnsim.nki import collectives as cc
    from trnsim.nki import jit

    @jit
    def kernel(x):
        cc.rank_id()
        return x

    with pytest.raises(ConstraintError, match="multi-rank launch"):
        kernel.launch((np.ones((2, 2), np.float32),), {}, chip="trn2")


def test_replica_group_rules():
    from trnsim.nki.collectives import ReplicaGroup, rg_partition_op

    assert ReplicaGroup.from_partition_op(8, rg_partition_op.div, 4).rank_lists == (
        (0, 1, 2, 3), (4, 5, 6, 7))
    assert ReplicaGroup.from_partition_op(8, rg_partition_op.mod, 4).rank_lists == (
        (0, 4), (1, 5), (2, 6), (3, 7))
    assert ReplicaGroup.from_partition_op(8, rg_partition_op.bitwise_and, 0).rank_lists == (
        tuple(range(8)),)
    with pytest.raises(ConstraintError, match="only one rank-list"):
        ReplicaGroup([[0, 1], [1, 2]])
