"""NKI kernels that call every nki.collectives function, for the multi-rank tests."""

from __future__ import annotations

from trnsim.nki import collectives as cc
from trnsim.nki import isa as nisa
from trnsim.nki import language as nl


def _private(x):
    """A private-HBM copy of a kernel argument (at LNC=1 collective sources must be private)."""
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
    nisa.dma_copy(dst=t, src=x)
    return t


def _out(t):
    o = nl.ndarray(t.shape, t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=o, src=t)
    return o


def group(n):
    return cc.ReplicaGroup([list(range(n))])


def all_reduce_kernel(x, n, op=nl.add):
    src = _private(x)
    dst = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
    cc.all_reduce([src], [dst], group(n), op)
    return _out(dst)


def all_gather_kernel(x, n):
    src = _private(x)
    dst = nl.ndarray((x.shape[0] * n, *x.shape[1:]), x.dtype, buffer=nl.hbm)
    cc.all_gather([src], [dst], group(n), collective_dim=0)
    return _out(dst)


def reduce_scatter_kernel(x, n):
    src = _private(x)
    dst = nl.ndarray((x.shape[0] // n, *x.shape[1:]), x.dtype, buffer=nl.hbm)
    cc.reduce_scatter([src], [dst], group(n), collective_dim=0, op=nl.add)
    return _out(dst)


def all_to_all_kernel(x, n):
    src = _private(x)
    dst = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
    cc.all_to_all([src], [dst], group(n), collective_dim=0)
    return _out(dst)


def permute_kernel(x, n):
    src = _private(x)
    dst = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
    pairs = [(r, (r + 1) % n) for r in range(n)]
    cc.collective_permute([src], [dst], source_target_pairs=pairs)
    return _out(dst)


def implicit_kernel(x, y, n):
    a, b = _private(x), _private(y)
    d0 = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
    d1 = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
    cc.collective_permute_implicit([[a]], [[d0]], group(n), channel_ids=[0])
    cc.collective_permute_implicit_reduce([[a]], [[b]], [[d1]], group(n), nl.maximum,
                                          channel_ids=[1])
    who = nl.ndarray((1, 1), nl.int32, buffer=nl.shared_hbm)
    reg = cc.collective_permute_implicit_current_processing_rank_id(1, group(n))
    nisa.register_store(who, reg)
    return _out(d0), _out(d1), who


def rank_kernel(x):
    out = nl.ndarray((1, 1), nl.int32, buffer=nl.shared_hbm)
    nisa.register_store(out, cc.rank_id())
    return out


def sbuf_all_reduce_kernel(x, n):
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    r = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    cc.all_reduce([t], [r], group(n), nl.add)
    g = nl.ndarray((x.shape[0], x.shape[1] * n), x.dtype, buffer=nl.sbuf)
    cc.all_gather([t], [g], group(n), collective_dim=1)
    o1 = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=o1, src=r)
    o2 = nl.ndarray(g.shape, x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=o2, src=g)
    return o1, o2


def all_to_all_v_kernel(x, meta, n):
    src = _private(x)
    m = nl.ndarray(meta.shape, meta.dtype, buffer=nl.hbm)
    nisa.dma_copy(dst=m, src=meta)
    dst = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
    cc.all_to_all_v([src], [dst], group(n), m)
    return _out(dst)

