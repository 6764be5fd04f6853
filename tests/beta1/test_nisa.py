"""Beta-1 nisa: every value-returning instruction vs numpy, with dtype= and mask=."""

from __future__ import annotations

import ml_dtypes
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np
import pytest
from b1_testing import tile_fn

from trnsim.errors import UnsupportedError

RNG = np.random.default_rng(1)
X = RNG.standard_normal((64, 32)).astype(np.float32)
Y = RNG.standard_normal((64, 32)).astype(np.float32)
COL = RNG.uniform(0.5, 1.0, (64, 1)).astype(np.float32)


def _kernel(body, out_shape, out_dtype=nl.float32):
    """A kernel storing body(*loaded inputs) into a fresh output."""

    @nki.jit
    def kernel(*ins):
        out = nl.ndarray(out_shape, dtype=out_dtype, buffer=nl.shared_hbm)
        nl.store(out, value=body(*[nl.load(t) for t in ins]))
        return out

    return kernel


def test_tensor_tensor_with_dtype_and_mask():
    np.testing.assert_allclose(tile_fn(lambda a, b: nisa.tensor_tensor(a, b, np.add), X, Y), X + Y)
    got = tile_fn(lambda a, b: nisa.tensor_tensor(a, b, nl.multiply, dtype=nl.bfloat16), X, Y)
    assert got.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(got, (X * Y).astype(ml_dtypes.bfloat16))

    def body(a, b):
        r = nl.zeros((64, 32), dtype=nl.float32)
        i_p = nl.arange(64)[:, None]
        r[...] = nisa.tensor_tensor(a, b, np.subtract, mask=i_p < 16)
        return r

    want = np.zeros_like(X)
    want[:16] = X[:16] - Y[:16]
    np.testing.assert_allclose(tile_fn(body, X, Y), want)


def test_tensor_scalar_and_scalar_tensor_tensor():
    got = tile_fn(
        lambda a, c: nisa.tensor_scalar(a, np.subtract, c, op1=np.multiply, operand1=2.0), X, COL
    )
    np.testing.assert_allclose(got, (X - COL) * 2, rtol=1e-6)
    got = tile_fn(lambda a: nisa.tensor_scalar(a, np.subtract, 1.0, reverse0=True), X)
    np.testing.assert_allclose(got, 1.0 - X)
    got = tile_fn(
        lambda a, b: nisa.scalar_tensor_tensor(
            data=a, op0=np.multiply, operand0=3.0, op1=np.add, operand1=b
        ),
        X,
        Y,
    )
    np.testing.assert_allclose(got, X * 3 + Y, rtol=1e-6)


def test_tensor_tensor_scan():
    a = X * 0.5
    got = tile_fn(lambda p, q: nisa.tensor_tensor_scan(p, q, 0.0, np.multiply, np.add), a, Y)
    want = np.zeros_like(a)
    prev = np.zeros(64, np.float32)
    for i in range(32):
        prev = a[:, i] * prev + Y[:, i]
        want[:, i] = prev
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_tensor_reduce_negate_keepdims():
    got = tile_fn(lambda a: nisa.tensor_reduce(np.max, a, axis=1, negate=True), X)
    np.testing.assert_allclose(got[:, 0], -X.max(axis=1))
    x3 = RNG.standard_normal((32, 4, 8)).astype(np.float32)
    got = tile_fn(lambda a: nisa.tensor_reduce(np.add, a, axis=(1, 2), keepdims=True), x3)
    assert got.shape == (32, 1, 1)
    np.testing.assert_allclose(got[:, 0, 0], x3.sum(axis=(1, 2)), rtol=1e-5, atol=1e-6)


def test_tensor_scalar_reduce_activation_reduce_and_activation():
    @nki.jit
    def kernel(x, c):
        t = nl.load(x)
        r1 = nl.ndarray((64, 1), dtype=nl.float32)
        r2 = nl.ndarray((64, 1), dtype=nl.float32)
        r3 = nl.ndarray((64, 1), dtype=nl.float32)
        a = nisa.tensor_scalar_reduce(
            data=t, op0=np.multiply, operand0=2.0, reduce_op=np.add, reduce_res=r1
        )
        b = nisa.activation_reduce(np.exp, t, reduce_op=np.add, reduce_res=r2)
        e = nisa.activation(
            np.exp,
            t,
            bias=nl.load(c),
            scale=0.5,
            reduce_op=np.add,
            reduce_res=r3,
            reduce_cmd=nisa.reduce_cmd.reset_reduce,
        )
        out = nl.ndarray((64, 99), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out[:, 0:32], value=a)
        nl.store(out[:, 32:64], value=b)
        nl.store(out[:, 64:96], value=e)
        nl.store(out[:, 96:97], value=r1)
        nl.store(out[:, 97:98], value=r2)
        nl.store(out[:, 98:99], value=r3)
        return out

    g = kernel(X, COL)
    np.testing.assert_allclose(g[:, :32], 2 * X)
    np.testing.assert_allclose(g[:, 32:64], np.exp(X), rtol=1e-6)
    np.testing.assert_allclose(g[:, 64:96], np.exp(0.5 * X + COL), rtol=1e-5)
    np.testing.assert_allclose(g[:, 96], (2 * X).sum(axis=1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(g[:, 97], np.exp(X).sum(axis=1), rtol=1e-5)
    np.testing.assert_allclose(g[:, 98], np.exp(0.5 * X + COL).sum(axis=1), rtol=1e-5)


@pytest.mark.parametrize(("engine", "opcode", "on", "unknown"), [
    (None, "reciprocal", "vector", True),
    (nisa.unknown_engine, "reciprocal", "vector", True),
    (nisa.vector_engine, "reciprocal", "vector", False),
    (nisa.scalar_engine, "activation", "scalar", True),
])
def test_reciprocal_engine(engine, opcode, on, unknown):
    """engine= (NKI docs v2.21+): VectorE's precise reciprocal, ScalarE's activation(reciprocal),
    or unknown (the default: the compiler's choice, recorded as such); the same values."""
    import trnsim

    def body(a):
        return nisa.reciprocal(a) if engine is None else nisa.reciprocal(a, engine=engine)

    prof = trnsim.profile(_kernel(body, X.shape), X, chip="trn1")
    (ins,) = [i for i in prof.program if i.opcode != "dma_copy"]
    assert (ins.opcode, ins.engine, ins.engine_unknown) == (opcode, on, unknown)
    if opcode == "activation":
        assert ins.attrs["op"] == "reciprocal"
    np.testing.assert_allclose(prof.outputs, 1 / X, rtol=1e-6)


def test_reciprocal_on_another_engine_is_refused():
    from trnsim.errors import ConstraintError

    with pytest.raises(ConstraintError, match=r"engine='gpsimd'.*allowed: nisa.vector_engine"):
        tile_fn(lambda a: nisa.reciprocal(a, engine=nisa.gpsimd_engine), X)


def test_copies_reciprocal_memset_iota_dropout():
    np.testing.assert_array_equal(tile_fn(lambda a: nisa.tensor_copy(a), X), X)
    np.testing.assert_allclose(tile_fn(lambda a: nisa.reciprocal(a), X), 1 / X, rtol=1e-6)
    got = _kernel(lambda a: nisa.memset((8, 4), 7.0, nl.float32), (8, 4))(X)
    np.testing.assert_array_equal(got, np.full((8, 4), 7.0))
    expr = 5 + 2 * nl.arange(16)[None, :] + 3 * nl.arange(8)[:, None]
    got = _kernel(lambda a: nisa.iota(expr, dtype=nl.int32), (8, 16), nl.int32)(X)
    np.testing.assert_array_equal(got, 5 + 2 * np.arange(16)[None] + 3 * np.arange(8)[:, None])
    d = tile_fn(lambda a: nisa.dropout(a, 0.25), np.ones((64, 32), np.float32))
    assert set(np.unique(d)) <= {0.0, 1.0} and 0.1 < (d == 0).mean() < 0.4


def test_tensor_copy_predicated_and_select_reduce():
    @nki.jit
    def kernel(a, b):
        ta, tb = nl.load(a), nl.load(b)
        p = nl.greater(ta, 0.0, dtype=nl.uint8)
        nisa.tensor_copy_predicated(src=ta, dst=tb, predicate=p)
        d = nl.ndarray((64, 32), dtype=nl.float32)
        nisa.select_reduce(dst=d, predicate=p, on_true=ta, on_false=-1.0)
        out = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out[:, 0:32], value=tb)
        nl.store(out[:, 32:64], value=d)
        return out

    g = kernel(X, Y)
    np.testing.assert_array_equal(g[:, :32], np.where(X > 0, X, Y))
    np.testing.assert_array_equal(g[:, 32:], np.where(X > 0, X, -1.0))


def test_tensor_copy_dynamic_src_and_dst():
    @nki.jit
    def kernel(x, off):
        t = nl.load(x)
        o = nl.load(off)
        i_p, i_f = nl.arange(64)[:, None], nl.arange(8)[None, :]
        r = nisa.tensor_copy_dynamic_src(t[i_p, o + i_f])
        d = nl.zeros((64, 32), dtype=nl.float32)
        nisa.tensor_copy_dynamic_dst(dst=d[:, nl.ds(o, 8)], src=r)
        out = nl.ndarray((64, 40), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out[:, 0:8], value=r)
        nl.store(out[:, 8:40], value=d)
        return out

    g = kernel(X, np.array([[5]], dtype=np.int32))
    np.testing.assert_array_equal(g[:, :8], X[:, 5:13])
    want = np.zeros_like(X)
    want[:, 5:13] = X[:, 5:13]
    np.testing.assert_array_equal(g[:, 8:], want)


def test_affine_select_iota_like_causal_mask():
    def body(t):
        iq, ik = nl.arange(64)[:, None], nl.arange(32)[None, :]
        return nisa.affine_select(iq >= ik, t, -9999.0)

    want = np.where(np.arange(64)[:, None] >= np.arange(32)[None], X, -9999.0)
    np.testing.assert_array_equal(tile_fn(body, X), want)


def test_range_select():
    @nki.jit
    def kernel(a, lo, hi):
        res = nl.ndarray((64, 1), dtype=nl.float32)
        o = nisa.range_select(
            on_true_tile=nl.load(a),
            comp_op0=np.greater_equal,
            comp_op1=np.less,
            bound0=nl.load(lo),
            bound1=nl.load(hi),
            reduce_cmd=nisa.reduce_cmd.reset_reduce,
            reduce_res=res,
            reduce_op=np.max,
        )
        out = nl.ndarray((64, 33), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out[:, 0:32], value=o)
        nl.store(out[:, 32:33], value=res)
        return out

    lo, hi = np.full((64, 1), 4, np.float32), np.full((64, 1), 10, np.float32)
    g = kernel(X, lo, hi)
    j = np.arange(32)[None]
    want = np.where((j >= 4) & (j < 10), X, nisa.fp32.min)
    np.testing.assert_array_equal(g[:, :32], want)
    np.testing.assert_array_equal(g[:, 32], X[:, 4:10].max(axis=1))


def test_bn_stats_bn_aggr():
    got = tile_fn(lambda a: nisa.bn_aggr(nisa.bn_stats(a)), X)
    np.testing.assert_allclose(got, np.stack([X.mean(1), X.var(1)], 1), rtol=1e-4, atol=1e-5)


def test_tensor_engine_instructions():
    np.testing.assert_array_equal(tile_fn(lambda a: nisa.nc_transpose(a), X), X.T)
    np.testing.assert_allclose(
        tile_fn(lambda a, b: nisa.nc_matmul(a, b), X, Y), X.T @ Y, rtol=1e-4, atol=1e-4
    )


def test_top8_family():
    np.testing.assert_array_equal(tile_fn(lambda a: nisa.max8(src=a), X), -np.sort(-X, 1)[:, :8])
    got = _kernel(lambda t: nisa.nc_find_index8(data=t, vals=nisa.max8(src=t)), (64, 8), nl.uint32)(
        X
    )
    np.testing.assert_array_equal(got, np.argsort(-X, 1)[:, :8])
    want = X.copy()
    np.put_along_axis(want, np.argsort(-X, 1)[:, :8], 0.0, 1)
    got = tile_fn(lambda t: nisa.nc_match_replace8(data=t, vals=nisa.max8(src=t), imm=0.0), X)
    np.testing.assert_array_equal(got, want)


def test_gpsimd_instructions():
    np.testing.assert_allclose(
        tile_fn(lambda a: nisa.tensor_partition_reduce(np.add, a), X),
        X.sum(0, keepdims=True),
        rtol=1e-5,
        atol=1e-5,
    )

    @nki.jit
    def shuffle(a):
        d = nl.ndarray((32, 32), dtype=nl.float32)
        nisa.nc_stream_shuffle(nl.load(a[0:32, :]), d, list(range(31, -1, -1)))
        out = nl.ndarray((32, 32), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=d)
        return out

    np.testing.assert_array_equal(shuffle(X), X[:32][::-1])
    src = RNG.standard_normal((16, 64)).astype(np.float32)
    idx = RNG.integers(0, 64, (16, 2)).astype(np.uint16)
    got = tile_fn(lambda s, i: nisa.local_gather(s, i), src, idx)
    # (P, index columns, 16 partitions of the core, elements per index), as the docs' example
    assert got.shape == (16, 2, 16, 1)
    np.testing.assert_array_equal(got.reshape(16, 32), src[:, idx.flatten(order="F")])
    seg = np.array([[1, 1, 2, 2, 2, 0, 3, 3]], dtype=np.float32)
    got = _kernel(lambda s: nisa.sequence_bounds(segment_ids=s), (1, 2, 8))(seg)
    np.testing.assert_array_equal(got[0], [[0, 0, 2, 2, 2, 8, 6, 6], [2, 2, 5, 5, 5, -1, 8, 8]])


def test_dma_instructions():
    @nki.jit
    def copy(a):
        out = nl.ndarray((64, 32), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((64, 32), dtype=nl.float32)
        nisa.dma_copy(dst=t, src=a)
        nisa.dma_copy(dst=out, src=t)
        nisa.dma_copy(dst=out[0:8, :], src=t[0:8, :], dst_rmw_op=np.add)
        return out

    want = X.copy()
    want[:8] *= 2
    np.testing.assert_array_equal(copy(X), want)
    xb = X.astype(ml_dtypes.bfloat16)

    @nki.jit
    def transpose(a):
        out = nl.ndarray((32, 64), dtype=nl.bfloat16, buffer=nl.shared_hbm)
        nl.store(out, value=nisa.dma_transpose(a))
        return out

    np.testing.assert_array_equal(transpose(xb), xb.T)


def test_get_nc_version_follows_chip():
    seen = {}

    def kernel(a):
        seen["v"] = nisa.get_nc_version()
        out = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(a[0:1, 0:1]))
        return out

    nki.jit(kernel)(X)
    assert seen["v"] == nisa.nc_version.gen3  # B1 kernels default to trn2
    nki.jit(kernel, platform_target="trn1")(X)
    assert seen["v"] == nisa.nc_version.gen2


def test_builtin_custom_op_is_not_simulated():
    def kernel(a):
        nisa.builtin_custom_op("f", "lib.so", 1, 1, [], [])

    with pytest.raises(UnsupportedError, match="custom GpSimd"):
        nki.simulate_kernel(kernel, X)
