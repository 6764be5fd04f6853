"""QA: realistic GA (`import nki`) kernels in the public nki-library idioms, run unmodified.

Each kernel is our own; the reference is numpy in float64, tolerances are per dtype.
"""

from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

P = 128


# ---------------------------------------------------------------- tensor add (tiled, ds + slices)


def tiled_add(a, b):
    rows, cols = a.shape
    out = nl.ndarray((rows, cols), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(rows // P):
        ta = nl.ndarray((P, cols), dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray((P, cols), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a[nl.ds(i * P, P), :])
        nisa.dma_copy(dst=tb, src=b[i * P : (i + 1) * P, 0:cols])
        tc = nl.ndarray((P, cols), dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=tc, data1=ta, data2=tb, op=nl.add)
        nisa.dma_copy(dst=out[nl.ds(i * P, P), :], src=tc)
    return out


def test_tiled_add(rng):
    a = rng.standard_normal((384, 200)).astype(np.float32)
    b = rng.standard_normal((384, 200)).astype(np.float32)
    out = nki.simulate(tiled_add)(a, b)
    np.testing.assert_array_equal(out, a + b)


def ragged_add(a, b):
    """Row count not a multiple of 128: the last tile is partial (min()-style slicing)."""
    rows, cols = a.shape
    out = nl.ndarray((rows, cols), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range((rows + P - 1) // P):
        n = min(P, rows - i * P)
        ta = nl.ndarray((P, cols), dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray((P, cols), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta[0:n, :], src=a[i * P : i * P + n, :])
        nisa.dma_copy(dst=tb[0:n, :], src=b[i * P : i * P + n, :])
        nisa.tensor_tensor(dst=ta[0:n, :], data1=ta[0:n, :], data2=tb[0:n, :], op=nl.multiply)
        nisa.dma_copy(dst=out[i * P : i * P + n, :], src=ta[0:n, :])
    return out


def test_ragged_multiply(rng):
    a = rng.standard_normal((300, 48)).astype(np.float32)
    b = rng.standard_normal((300, 48)).astype(np.float32)
    out = nki.simulate(ragged_add)(a, b)
    np.testing.assert_array_equal(out, a * b)


# ---------------------------------------------------------------- matmul, PSUM accumulation over K


def matmul_kt(lhs_t, rhs):
    k, m = lhs_t.shape
    _, n = rhs.shape
    out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    for mi in nl.affine_range(m // P):
        for ni in nl.affine_range(n // 512):
            acc = nl.ndarray((P, 512), dtype=nl.float32, buffer=nl.psum)
            for ki in nl.affine_range(k // P):
                lt = nl.ndarray((P, P), dtype=lhs_t.dtype, buffer=nl.sbuf)
                rt = nl.ndarray((P, 512), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=lt, src=lhs_t[nl.ds(ki * P, P), nl.ds(mi * P, P)])
                nisa.dma_copy(dst=rt, src=rhs[nl.ds(ki * P, P), nl.ds(ni * 512, 512)])
                nisa.nc_matmul(dst=acc, stationary=lt, moving=rt)
            res = nl.ndarray((P, 512), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res, src=acc)
            nisa.dma_copy(dst=out[nl.ds(mi * P, P), nl.ds(ni * 512, 512)], src=res)
    return out


def test_matmul_accumulates_over_k(rng):
    lhs_t = rng.standard_normal((384, 128)).astype(np.float32)
    rhs = rng.standard_normal((384, 1024)).astype(np.float32)
    out = nki.simulate(matmul_kt)(lhs_t, rhs)
    ref = lhs_t.astype(np.float64).T @ rhs.astype(np.float64)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-3)


def test_matmul_bf16_inputs(rng):
    import ml_dtypes

    lhs_t = rng.standard_normal((256, 128)).astype(ml_dtypes.bfloat16)
    rhs = rng.standard_normal((256, 512)).astype(ml_dtypes.bfloat16)
    out = nki.simulate(matmul_kt)(lhs_t, rhs)
    ref = lhs_t.astype(np.float64).T @ rhs.astype(np.float64)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, ref, rtol=1e-3, atol=1e-2)


def matmul_explicit_accumulate(lhs_t, rhs):
    """GA `accumulate=` flag: first K tile overwrites explicitly, the rest add."""
    k, m = lhs_t.shape
    _, n = rhs.shape
    out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)
    for ki in nl.sequential_range(k // P):
        lt = nl.ndarray((P, m), dtype=lhs_t.dtype, buffer=nl.sbuf)
        rt = nl.ndarray((P, n), dtype=rhs.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=lt, src=lhs_t[nl.ds(ki * P, P), :])
        nisa.dma_copy(dst=rt, src=rhs[nl.ds(ki * P, P), :])
        nisa.nc_matmul(dst=acc, stationary=lt, moving=rt, accumulate=ki > 0)
    res = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    nisa.dma_copy(dst=out, src=res)
    return out


def test_matmul_explicit_accumulate_flag(rng):
    lhs_t = rng.standard_normal((256, 64)).astype(np.float32)
    rhs = rng.standard_normal((256, 96)).astype(np.float32)
    out = nki.simulate(matmul_explicit_accumulate)(lhs_t, rhs)
    ref = lhs_t.astype(np.float64).T @ rhs.astype(np.float64)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-3)


def matmul_reuse_psum_twice(lhs_t, rhs):
    """The same PSUM tile reused for two *independent* products in a loop over output tiles
    (accumulate=False on the first K step resets it)."""
    k, m = lhs_t.shape
    _, n = rhs.shape
    out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((m, 128), dtype=nl.float32, buffer=nl.psum)
    lt = nl.ndarray((k, m), dtype=lhs_t.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=lt, src=lhs_t)
    for ni in nl.sequential_range(n // 128):
        rt = nl.ndarray((k, 128), dtype=rhs.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=rt, src=rhs[:, nl.ds(ni * 128, 128)])
        nisa.nc_matmul(dst=acc, stationary=lt, moving=rt, accumulate=False)
        res = nl.ndarray((m, 128), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=acc)
        nisa.dma_copy(dst=out[:, nl.ds(ni * 128, 128)], src=res)
    return out


def test_psum_reuse_with_accumulate_false(rng):
    lhs_t = rng.standard_normal((128, 32)).astype(np.float32)
    rhs = rng.standard_normal((128, 384)).astype(np.float32)
    out = nki.simulate(matmul_reuse_psum_twice)(lhs_t, rhs)
    ref = lhs_t.astype(np.float64).T @ rhs.astype(np.float64)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-3)


# ---------------------------------------------------------------- transpose (TensorE and VectorE)


def transpose_pe(x):
    m, n = x.shape
    out = nl.ndarray((n, m), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((m, n), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    tp = nl.ndarray((n, m), dtype=x.dtype, buffer=nl.psum)
    nisa.nc_transpose(dst=tp, data=t)
    ts = nl.ndarray((n, m), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=ts, src=tp)
    nisa.dma_copy(dst=out, src=ts)
    return out


def test_nc_transpose_tensor_engine(rng):
    x = rng.standard_normal((96, 128)).astype(np.float32)
    out = nki.simulate(transpose_pe)(x)
    np.testing.assert_array_equal(out, x.T)


def transpose_vector(x):
    m, n = x.shape
    out = nl.ndarray((n, m), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((m, n), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    ts = nl.ndarray((n, m), dtype=x.dtype, buffer=nl.sbuf)
    nisa.nc_transpose(dst=ts, data=t, engine=nisa.vector_engine)
    nisa.dma_copy(dst=out, src=ts)
    return out


def test_nc_transpose_vector_engine(rng):
    x = rng.standard_normal((32, 16)).astype(np.float32)
    out = nki.simulate(transpose_vector)(x)
    np.testing.assert_array_equal(out, x.T)


def transpose_via_identity_matmul(x):
    """The classic pre-GA idiom: transpose as matmul against an identity built with iota +
    affine_select (is_transpose=True on the matmul)."""
    m, n = x.shape
    out = nl.ndarray((n, m), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((m, n), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    ident = nl.ndarray((m, m), dtype=x.dtype, buffer=nl.sbuf)
    ones = nl.ndarray((m, m), dtype=x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=ones, value=1.0)
    # keep where (p - j) == 0
    nisa.affine_select(
        dst=ident,
        pattern=[[-1, m]],
        channel_multiplier=1,
        on_true_tile=ones,
        on_false_value=0.0,
        cmp_op=nl.equal,
    )
    acc = nl.ndarray((n, m), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=t, moving=ident)
    res = nl.ndarray((n, m), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    nisa.dma_copy(dst=out, src=res)
    return out


def test_transpose_via_identity_matmul(rng):
    x = rng.standard_normal((128, 64)).astype(np.float32)
    out = nki.simulate(transpose_via_identity_matmul)(x)
    np.testing.assert_allclose(out, x.T, rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------- softmax: ISA and nl wrappers


def softmax_isa(x):
    m, n = x.shape
    out = nl.ndarray((m, n), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(m // P):
        t = nl.ndarray((P, n), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[nl.ds(i * P, P), :])
        mx = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=mx, op=nl.maximum, data=t, axis=1, keepdims=True)
        neg = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=neg, data=mx, op0=nl.multiply, operand0=-1.0)
        e = nl.ndarray((P, n), dtype=nl.float32, buffer=nl.sbuf)
        s = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(
            dst=e,
            op=nl.exp,
            data=t,
            bias=neg,
            scale=1.0,
            reduce_op=nl.add,
            reduce_res=s,
            reduce_cmd=nisa.reduce_cmd.reset_reduce,
        )
        r = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=r, data=s)
        o = nl.ndarray((P, n), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=o, data=e, op0=nl.multiply, operand0=r)
        nisa.dma_copy(dst=out[nl.ds(i * P, P), :], src=o)
    return out


def _softmax_ref(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_softmax_isa(rng):
    x = (rng.standard_normal((256, 300)) * 5).astype(np.float32)
    out = nki.simulate(softmax_isa)(x)
    np.testing.assert_allclose(out, _softmax_ref(x), rtol=1e-4, atol=1e-7)


def softmax_nl(x):
    t = nl.load(x)
    mx = nl.max(t, axis=1, keepdims=True)
    sh = nl.subtract(t, mx)
    e = nl.exp(sh)
    s = nl.sum(e, axis=1, keepdims=True)
    r = nl.reciprocal(s)
    o = nl.multiply(e, r)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=o)
    return out


def test_softmax_nl_wrappers(rng):
    x = (rng.standard_normal((128, 64)) * 3).astype(np.float32)
    out = nki.simulate(softmax_nl)(x)
    np.testing.assert_allclose(out, _softmax_ref(x), rtol=1e-4, atol=1e-7)


def softmax_nl_builtin(x):
    t = nl.load(x)
    o = nl.softmax(t, axis=1)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=o)
    return out


def test_softmax_nl_builtin(rng):
    x = (rng.standard_normal((64, 80)) * 3).astype(np.float32)
    out = nki.simulate(softmax_nl_builtin)(x)
    np.testing.assert_allclose(out, _softmax_ref(x), rtol=1e-4, atol=1e-7)


# ---------------------------------------------------------------- rmsnorm / layernorm


def rmsnorm(x, g, eps):
    m, n = x.shape
    out = nl.ndarray((m, n), dtype=x.dtype, buffer=nl.shared_hbm)
    gt = nl.ndarray((P, n), dtype=g.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=gt, src=g.reshape((1, n)).broadcast(0, P))
    for i in nl.affine_range((m + P - 1) // P):
        rows = min(P, m - i * P)
        t = nl.ndarray((P, n), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[0:rows, :], src=x[nl.ds(i * P, rows), :])
        sq = nl.ndarray((P, n), dtype=nl.float32, buffer=nl.sbuf)
        ss = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(
            dst=sq[0:rows, :],
            op=nl.square,
            data=t[0:rows, :],
            reduce_op=nl.add,
            reduce_res=ss[0:rows, :],
        )
        rs = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(
            dst=rs[0:rows, :],
            data=ss[0:rows, :],
            op0=nl.multiply,
            operand0=1.0 / n,
            op1=nl.add,
            operand1=eps,
        )
        nisa.activation(dst=rs[0:rows, :], op=nl.rsqrt, data=rs[0:rows, :])
        o = nl.ndarray((P, n), dtype=x.dtype, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(
            dst=o[0:rows, :],
            data=t[0:rows, :],
            op0=nl.multiply,
            operand0=rs[0:rows, :],
            op1=nl.multiply,
            operand1=gt[0:rows, :],
        )
        nisa.dma_copy(dst=out[nl.ds(i * P, rows), :], src=o[0:rows, :])
    return out


def test_rmsnorm_ragged_rows(rng):
    x = rng.standard_normal((200, 256)).astype(np.float32)
    g = rng.uniform(0.5, 1.5, 256).astype(np.float32)
    out = nki.simulate(rmsnorm)(x, g, 1e-5)
    x64 = x.astype(np.float64)
    ref = x64 / np.sqrt((x64**2).mean(axis=1, keepdims=True) + 1e-5) * g
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)


def layernorm_bn(x, gamma, beta, eps):
    """bn_stats over 512-wide chunks, bn_aggr, then (x - mean) * rstd * gamma + beta."""
    m, n = x.shape
    fmax = nl.tile_size.bn_stats_fmax
    chunks = (n + fmax - 1) // fmax
    out = nl.ndarray((m, n), dtype=x.dtype, buffer=nl.shared_hbm)
    gt = nl.ndarray((P, n), dtype=gamma.dtype, buffer=nl.sbuf)
    bt = nl.ndarray((P, n), dtype=beta.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=gt, src=gamma.reshape((1, n)).broadcast(0, P))
    nisa.dma_copy(dst=bt, src=beta.reshape((1, n)).broadcast(0, P))
    for i in nl.affine_range(m // P):
        t = nl.ndarray((P, n), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[nl.ds(i * P, P), :])
        stats = nl.ndarray((P, chunks * 6), dtype=nl.float32, buffer=nl.sbuf)
        for c in nl.affine_range(chunks):
            w = min(fmax, n - c * fmax)
            nisa.bn_stats(dst=stats[:, nl.ds(c * 6, 6)], data=t[:, nl.ds(c * fmax, w)])
        mv = nl.ndarray((P, 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.bn_aggr(dst=mv, data=stats)
        rstd = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(
            dst=rstd, data=mv[:, 1:2], op0=nl.add, operand0=eps, op1=nl.rsqrt, operand1=None
        )
        y = nl.ndarray((P, n), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(
            dst=y, data=t, op0=nl.subtract, operand0=mv[:, 0:1], op1=nl.multiply, operand1=rstd
        )
        nisa.tensor_tensor(dst=y, data1=y, data2=gt, op=nl.multiply)
        o = nl.ndarray((P, n), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=o, data1=y, data2=bt, op=nl.add)
        nisa.dma_copy(dst=out[nl.ds(i * P, P), :], src=o)
    return out


def test_layernorm_bn_stats_aggr(rng):
    n = 1200  # 3 chunks, the last one ragged (176)
    x = (rng.standard_normal((128, n)) * 2 + 3).astype(np.float32)
    gamma = rng.uniform(0.5, 1.5, n).astype(np.float32)
    beta = rng.standard_normal(n).astype(np.float32)
    out = nki.simulate(layernorm_bn)(x, gamma, beta, 1e-5)
    x64 = x.astype(np.float64)
    mu = x64.mean(axis=1, keepdims=True)
    var = x64.var(axis=1, keepdims=True)
    ref = (x64 - mu) / np.sqrt(var + 1e-5) * gamma + beta
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- causal attention (one head)


def causal_attention(q_t, k_t, v):
    """q_t, k_t: [d, S] (d on partitions), v: [S, d]; S = 128. Returns softmax(QK^T/sqrt(d)
    with a causal mask) @ V."""
    d, s = q_t.shape
    out = nl.ndarray((s, d), dtype=nl.float32, buffer=nl.shared_hbm)
    qt = nl.ndarray((d, s), dtype=q_t.dtype, buffer=nl.sbuf)
    kt = nl.ndarray((d, s), dtype=k_t.dtype, buffer=nl.sbuf)
    vt = nl.ndarray((s, d), dtype=v.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=qt, src=q_t)
    nisa.dma_copy(dst=kt, src=k_t)
    nisa.dma_copy(dst=vt, src=v)
    sc_ps = nl.ndarray((s, s), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=sc_ps, stationary=qt, moving=kt)  # [q, k]
    sc = nl.ndarray((s, s), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=sc, op=nl.copy, data=sc_ps, scale=1.0 / float(np.sqrt(d)))
    # causal: keep k <= q, i.e. (q - k) >= 0
    masked = nl.ndarray((s, s), dtype=nl.float32, buffer=nl.sbuf)
    nisa.affine_select(
        dst=masked,
        pattern=[[-1, s]],
        channel_multiplier=1,
        on_true_tile=sc,
        on_false_value=-30000.0,
        cmp_op=nl.greater_equal,
    )
    neg_max = nl.ndarray((s, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=neg_max, op=nl.maximum, data=masked, axis=1, negate=True, keepdims=True)
    probs = nl.ndarray((s, s), dtype=nl.float32, buffer=nl.sbuf)
    denom = nl.ndarray((s, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(
        dst=probs,
        op=nl.exp,
        data=masked,
        bias=neg_max,
        reduce_op=nl.add,
        reduce_res=denom,
        reduce_cmd=nisa.reduce_cmd.reset_reduce,
    )
    # transpose probs so the key axis is on partitions, then probs @ v
    pt_ps = nl.ndarray((s, s), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_transpose(dst=pt_ps, data=probs)
    pt = nl.ndarray((s, s), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=pt, src=pt_ps)
    o_ps = nl.ndarray((s, d), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=o_ps, stationary=pt, moving=vt)
    inv = nl.ndarray((s, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.reciprocal(dst=inv, data=denom)
    o = nl.ndarray((s, d), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=o, data=o_ps, op0=nl.multiply, operand0=inv)
    nisa.dma_copy(dst=out, src=o)
    return out


def test_causal_attention(rng):
    d, s = 64, 128
    q = rng.standard_normal((s, d)).astype(np.float32)
    k = rng.standard_normal((s, d)).astype(np.float32)
    v = rng.standard_normal((s, d)).astype(np.float32)
    out = nki.simulate(causal_attention)(np.ascontiguousarray(q.T), np.ascontiguousarray(k.T), v)
    q64, k64, v64 = (a.astype(np.float64) for a in (q, k, v))
    sc = q64 @ k64.T / np.sqrt(d)
    sc[np.triu_indices(s, 1)] = -np.inf
    p = np.exp(sc - sc.max(axis=1, keepdims=True))
    ref = (p / p.sum(axis=1, keepdims=True)) @ v64
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- iota


def iota_kernel(dummy):
    out = nl.ndarray((P, 24), dtype=nl.int32, buffer=nl.shared_hbm)
    t = nl.ndarray((P, 4, 6), dtype=nl.int32, buffer=nl.sbuf)
    nisa.iota(dst=t, pattern=[[100, 4], [2, 6]], offset=7, channel_multiplier=1000)
    nisa.dma_copy(dst=out, src=t.reshape((P, 24)))
    return out


def test_iota_pattern():
    out = nki.simulate(iota_kernel)(np.zeros((1, 1), np.float32))
    p = np.arange(P)[:, None, None]
    w = np.arange(4)[None, :, None]
    x = np.arange(6)[None, None, :]
    ref = (7 + 1000 * p + 100 * w + 2 * x).reshape(P, 24)
    np.testing.assert_array_equal(out, ref)


# ---------------------------------------------------------------- average pooling (views)


def avgpool2x2(x):
    """x: [C, H, W] with C <= 128 channels on partitions; 2x2 average pooling, stride 2."""
    c, h, w = x.shape
    out = nl.ndarray((c, h // 2, w // 2), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((c, h, w), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    # view [c, h/2, 2, w/2, 2] -> permute to [c, h/2, w/2, 2, 2] and reduce the last two axes
    v5 = t.reshape((c, h // 2, 2, w // 2, 2)).permute((0, 1, 3, 2, 4))
    s = nl.ndarray((c, h // 2, w // 2), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=s, op=nl.add, data=v5, axis=(3, 4))
    o = nl.ndarray((c, h // 2, w // 2), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=o, data=s, op0=nl.multiply, operand0=0.25)
    nisa.dma_copy(dst=out, src=o)
    return out


def test_avgpool_with_permuted_view(rng):
    x = rng.standard_normal((64, 8, 12)).astype(np.float32)
    out = nki.simulate(avgpool2x2)(x)
    ref = x.astype(np.float64).reshape(64, 4, 2, 6, 2).mean(axis=(2, 4))
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------- mamba-style scan


def selective_scan(delta, a, u):
    """h[t] = exp(delta[t]*a) * h[t-1] + delta[t]*u[t] along the free axis, per channel."""
    c, t = delta.shape
    out = nl.ndarray((c, t), dtype=nl.float32, buffer=nl.shared_hbm)
    dt_ = nl.ndarray((c, t), dtype=nl.float32, buffer=nl.sbuf)
    ut = nl.ndarray((c, t), dtype=nl.float32, buffer=nl.sbuf)
    at = nl.ndarray((c, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=dt_, src=delta)
    nisa.dma_copy(dst=ut, src=u)
    nisa.dma_copy(dst=at, src=a)
    da = nl.ndarray((c, t), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=da, op=nl.exp, data=dt_, scale=at)
    du = nl.ndarray((c, t), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=du, data1=dt_, data2=ut, op=nl.multiply)
    h = nl.ndarray((c, t), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor_scan(dst=h, data0=da, data1=du, initial=0.0, op0=nl.multiply, op1=nl.add)
    nisa.dma_copy(dst=out, src=h)
    return out


def test_selective_scan(rng):
    c, t = 96, 64
    delta = rng.uniform(0.01, 0.2, (c, t)).astype(np.float32)
    a = -rng.uniform(0.5, 2.0, (c, 1)).astype(np.float32)
    u = rng.standard_normal((c, t)).astype(np.float32)
    out = nki.simulate(selective_scan)(delta, a, u)
    d64, a64, u64 = (z.astype(np.float64) for z in (delta, a, u))
    da = np.exp(d64 * a64)
    h = np.zeros(c)
    ref = np.zeros((c, t))
    for j in range(t):
        h = da[:, j] * h + d64[:, j] * u64[:, j]
        ref[:, j] = h
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- fused linear + bias + gelu/relu


def fused_linear_relu(x_t, w, bias):
    """y = relu(x @ w + bias), x_t: [K, M] (K on partitions), w: [K, N], bias: [M, 1] per row."""
    k, m = x_t.shape
    _, n = w.shape
    out = nl.ndarray((m, n), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    acc = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)
    for ki in nl.affine_range(k // P):
        xt = nl.ndarray((P, m), dtype=nl.bfloat16, buffer=nl.sbuf)
        wt = nl.ndarray((P, n), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x_t[nl.ds(ki * P, P), :])  # fp32 -> bf16 cast in the DMA
        nisa.dma_copy(dst=wt, src=w[nl.ds(ki * P, P), :])
        nisa.nc_matmul(dst=acc, stationary=xt, moving=wt)
    bt = nl.ndarray((m, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=bt, src=bias)
    y = nl.ndarray((m, n), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.activation(dst=y, op=nl.relu, data=acc, bias=bt)
    nisa.dma_copy(dst=out, src=y)
    return out


def test_fused_linear_bias_relu_bf16(rng):
    import ml_dtypes

    k, m, n = 256, 64, 200
    x_t = rng.standard_normal((k, m)).astype(np.float32)
    w = rng.standard_normal((k, n)).astype(np.float32)
    bias = rng.standard_normal((m, 1)).astype(np.float32)
    out = nki.simulate(fused_linear_relu)(x_t, w, bias)
    assert out.dtype == ml_dtypes.bfloat16
    xb = x_t.astype(ml_dtypes.bfloat16).astype(np.float64)
    wb = w.astype(ml_dtypes.bfloat16).astype(np.float64)
    ref = np.maximum(xb.T @ wb + bias, 0.0)
    np.testing.assert_allclose(out.astype(np.float64), ref, rtol=1e-2, atol=2e-2)


# ---------------------------------------------------------------- SPMD grid: kernel[2] + program_id


@nki.jit
def spmd_scale(x):
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    pid = nl.program_id(0)
    n = nl.num_programs(0)
    per = rows // n
    t = nl.ndarray((per, cols), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[nl.ds(pid * per, per), :])
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=float(pid + 2))
    nisa.dma_copy(dst=out[nl.ds(pid * per, per), :], src=t)
    return out


def test_kernel_lnc2_program_id(rng):
    x = rng.standard_normal((256, 32)).astype(np.float32)
    out = nki.simulate(spmd_scale[2])(x)
    ref = np.concatenate([x[:128] * 2, x[128:] * 3])
    np.testing.assert_array_equal(out, ref)


# ---------------------------------------------------------------- tensor_scalar with (P,1) operands


def tensor_scalar_p1(x, s0, s1):
    p, n = x.shape
    out = nl.ndarray((p, n), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((p, n), dtype=x.dtype, buffer=nl.sbuf)
    a = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
    b = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=a, src=s0)
    nisa.dma_copy(dst=b, src=s1)
    nisa.tensor_scalar(
        dst=t, data=t, op0=nl.subtract, operand0=a, reverse0=True, op1=nl.maximum, operand1=b
    )
    nisa.dma_copy(dst=out, src=t)
    return out


def test_tensor_scalar_p1_operands_and_reverse(rng):
    x = rng.standard_normal((100, 40)).astype(np.float32)
    s0 = rng.standard_normal((100, 1)).astype(np.float32)
    s1 = rng.standard_normal((100, 1)).astype(np.float32)
    out = nki.simulate(tensor_scalar_p1)(x, s0, s1)
    np.testing.assert_allclose(out, np.maximum(s0 - x, s1), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(("axis", "ref_axes"), [((1, 2), (1, 2)), (2, (2,)), (-1, (2,))])
def test_tensor_reduce_axes(rng, axis, ref_axes):
    def kernel(x):
        p, a, b = x.shape
        t = nl.ndarray((p, a, b), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        shape = tuple(1 if i in ref_axes else s for i, s in enumerate((p, a, b)))
        r = nl.ndarray(shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=r, op=nl.add, data=t, axis=axis, keepdims=True)
        out = nl.ndarray(shape, dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=r)
        return out

    x = rng.standard_normal((64, 6, 10)).astype(np.float32)
    out = nki.simulate(kernel)(x)
    ref = x.astype(np.float64).sum(axis=ref_axes, keepdims=True)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
