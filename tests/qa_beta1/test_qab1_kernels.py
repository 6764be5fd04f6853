"""Beta-1 kernels written the way public B1 kernels are: tiled matmul with PSUM `+=` over
affine_range, transposes, ragged masks, strided/affine loads, block (par_dim) tensors,
direct allocation, nt.mutable_tensor, SPMD grids, gather/scatter, iota/affine_select masks,
bn_stats/bn_aggr, loop_reduce, dropout/rand determinism and nki.benchmark."""

from __future__ import annotations

import ml_dtypes
import neuronxcc.nki as nki
import neuronxcc.nki.compiler as ncc
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt
import numpy as np

RNG = np.random.default_rng(3)


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def test_tiled_matmul_psum_accumulation_over_affine_range():
    @nki.jit(mode="simulation")
    def kernel(a_t, b):
        k_dim, m_dim = a_t.shape
        n_dim = b.shape[1]
        out = nl.ndarray((m_dim, n_dim), dtype=nl.float32, buffer=nl.shared_hbm)
        for n in nl.affine_range(n_dim // 256):
            acc = nl.zeros((m_dim, 256), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(k_dim // 128):
                lhs = nl.load(a_t[k * 128 : (k + 1) * 128, :])
                rhs = nl.load(b[k * 128 : (k + 1) * 128, n * 256 : (n + 1) * 256])
                acc += nl.matmul(lhs, rhs, transpose_x=True)
            nl.store(out[:, n * 256 : (n + 1) * 256], value=acc)
        return out

    a, b = _f32(384, 96), _f32(384, 512)
    np.testing.assert_allclose(kernel(a, b), a.T.astype(np.float64) @ b, rtol=1e-4, atol=1e-3)


def test_matmul_without_transpose_x_and_nc_matmul_plus_equals():
    @nki.jit
    def kernel(x, y, st, mv):
        o1 = nl.ndarray((x.shape[0], y.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
        o2 = nl.ndarray((st.shape[1], mv.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(o1, nl.matmul(nl.load(x), nl.load(y)))
        ps = nl.zeros((st.shape[1], mv.shape[1]), dtype=nl.float32, buffer=nl.psum)
        for k in nl.affine_range(2):
            ps += nisa.nc_matmul(
                nl.load(st[nl.ds(k * 128, 128), :]), nl.load(mv[nl.ds(k * 128, 128), :])
            )
        nl.store(o2, nl.copy(ps))
        return o1, o2

    x, y, st, mv = _f32(64, 128), _f32(128, 96), _f32(256, 128), _f32(256, 512)
    o1, o2 = kernel(x, y, st, mv)
    np.testing.assert_allclose(o1, x.astype(np.float64) @ y, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(o2, st.T.astype(np.float64) @ mv, rtol=1e-4, atol=1e-3)


def test_bf16_matmul_rounds_inputs_and_accumulates_in_fp32():
    @nki.jit
    def kernel(a_t, b):
        out = nl.ndarray((a_t.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
        r = nl.matmul(
            nl.load(a_t, dtype=nl.bfloat16), nl.load(b, dtype=nl.bfloat16), transpose_x=True
        )
        nl.store(out, r)
        return out

    a, b = _f32(128, 128), _f32(128, 256)
    ab = a.astype(ml_dtypes.bfloat16).astype(np.float64)
    bb = b.astype(ml_dtypes.bfloat16).astype(np.float64)
    np.testing.assert_allclose(kernel(a, b), ab.T @ bb, rtol=1e-5, atol=1e-4)


def test_three_transposes_agree():
    @nki.jit
    def kernel(a):
        outs = [
            nl.ndarray((a.shape[1], a.shape[0]), dtype=a.dtype, buffer=nl.shared_hbm)
            for _ in range(3)
        ]
        x = nl.load(a)
        nl.store(outs[0], nl.transpose(x))
        nl.store(outs[1], nisa.nc_transpose(x))
        nl.store(outs[2], nl.load_transpose2d(a))
        return tuple(outs)

    a = _f32(96, 80)
    for out in kernel(a):
        np.testing.assert_array_equal(out, a.T)


def test_ragged_two_level_masks_on_load_compute_store():
    n_rows, n_cols = 300, 200
    a = _f32(n_rows, n_cols)

    @nki.jit
    def kernel(x):
        out = nl.ndarray((n_rows, n_cols), dtype=nl.float32, buffer=nl.shared_hbm)
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(128)[None, :]
        for i in nl.affine_range((n_rows + 127) // 128):
            for j in nl.affine_range((n_cols + 127) // 128):
                m = (i * 128 + i_p < n_rows) & (j * 128 + i_f < n_cols)
                t = nl.load(x[i * 128 + i_p, j * 128 + i_f], mask=m)
                nl.store(out[i * 128 + i_p, j * 128 + i_f], value=nl.sigmoid(t, mask=m), mask=m)
        return out

    np.testing.assert_allclose(kernel(a), 1 / (1 + np.exp(-a.astype(np.float64))), rtol=1e-5)


def test_strided_and_affine_loads_and_slice_steps():
    a = _f32(256, 128)

    @nki.jit
    def kernel(x):
        o1 = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
        o2 = nl.ndarray((128, 32), dtype=x.dtype, buffer=nl.shared_hbm)
        o3 = nl.ndarray((128, 16), dtype=x.dtype, buffer=nl.shared_hbm)
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(64)[None, :]
        nl.store(o1[i_p, i_f], nl.load(x[2 * i_p + 1, 2 * i_f]))
        nl.store(o2, nl.load(x[0:128, 1:128:4]))
        for j in nl.affine_range(0, 16, 4):
            nl.store(o3[:, nl.ds(j, 4)], nl.load(x[128:256, nl.ds(j * 2, 4)]))
        return o1, o2, o3

    o1, o2, o3 = kernel(a)
    np.testing.assert_array_equal(o1, a[1::2, 0::2])
    np.testing.assert_array_equal(o2, a[:128, 1::4])
    want = np.concatenate([a[128:, 2 * j : 2 * j + 4] for j in range(0, 16, 4)], axis=1)
    np.testing.assert_array_equal(o3, want)


def test_block_par_dim_tensor_and_mod_alloc():
    a = _f32(4 * 128, 64)

    @nki.jit
    def kernel(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        out2 = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        blocks = nl.ndarray((4, nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.sbuf)
        i_p, i_f = nl.mgrid[0:128, 0:64]
        for b in nl.affine_range(4):
            blocks[b, i_p, i_f] = nl.load(x[b * 128 + i_p, i_f])
        for b in nl.affine_range(4):
            nl.store(out[b * 128 + i_p, i_f], blocks[b, i_p, i_f] * 3.0)
        ring = nl.ndarray(
            (4, nl.par_dim(128), 64),
            dtype=nl.float32,
            buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)),
        )
        for b in nl.sequential_range(4):
            ring[b] = nl.load(x[b * 128 : (b + 1) * 128, :])
            nl.store(out2[b * 128 : (b + 1) * 128, :], nl.exp(ring[b]))
        return out, out2

    out, out2 = kernel(a)
    np.testing.assert_allclose(out, a * 3, rtol=1e-6)
    np.testing.assert_allclose(out2, np.exp(a.astype(np.float64)), rtol=1e-5)


def test_mutable_tensor_parameter_is_updated_and_returned():
    @nki.jit
    def kernel(acc: nt.mutable_tensor, y):
        nl.store(acc, nl.load(acc) + nl.load(y))
        return acc

    a, y = _f32(128, 64), _f32(128, 64)
    np.testing.assert_allclose(kernel(a.copy(), y), a + y, rtol=1e-6)


def test_spmd_2d_grid_program_id_num_programs():
    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        i, j = nl.program_id(0), nl.program_id(1)
        rows, cols = a.shape[0] // nl.num_programs(0), a.shape[1] // nl.num_programs(1)
        t = nl.load(a[i * rows : (i + 1) * rows, j * cols : (j + 1) * cols])
        nl.store(out[i * rows : (i + 1) * rows, j * cols : (j + 1) * cols], t * (10 * i + j))
        return out

    a = _f32(256, 96)
    want = a.copy()
    for i in range(2):
        for j in range(3):
            want[i * 128 : (i + 1) * 128, j * 32 : (j + 1) * 32] *= 10 * i + j
    np.testing.assert_allclose(kernel[2, 3](a), want, rtol=1e-6)


def test_gather_flattened_and_atomic_rmw_with_duplicate_rows():
    data = _f32(32, 4, 16)
    idx = RNG.integers(0, 64, (32, 20)).astype(np.uint32)

    @nki.jit
    def gather(d, i):
        out = nl.ndarray(i.shape, dtype=d.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.gather_flattened(nl.load(d), nl.load(i)))
        return out

    want = np.take_along_axis(data.reshape(32, 64), idx.astype(np.int64), axis=1)
    np.testing.assert_array_equal(gather(data, idx), want)

    @nki.jit
    def scatter_add(table, rows, vals):
        it = nl.load(rows)
        ix = nl.arange(table.shape[1])[None, :]
        nl.atomic_rmw(table[it, ix], value=nl.load(vals), op=np.add)

    table, vals = _f32(16, 8), _f32(4, 8)
    rows = np.array([[3], [5], [3], [0]], dtype=np.int32)
    want = table.astype(np.float64)
    for r in range(4):
        want[rows[r, 0]] += vals[r]
    scatter_add(table, rows, vals)  # pass-by-reference style: writes its argument
    np.testing.assert_allclose(table, want, rtol=1e-6, atol=1e-6)


def test_iota_and_affine_select_causal_mask():
    a = _f32(128, 128)

    @nki.jit
    def kernel(x):
        causal = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        ramp = nl.ndarray((128, 64), dtype=nl.int32, buffer=nl.shared_hbm)
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(128)[None, :]
        nl.store(
            causal,
            nisa.affine_select(
                pred=(i_p - i_f >= 0), on_true_tile=nl.load(x), on_false_value=-9984.0
            ),
        )
        nl.store(
            ramp, nisa.iota(nl.arange(128)[:, None] * 64 + nl.arange(64)[None, :], dtype=nl.int32)
        )
        return causal, ramp

    causal, ramp = kernel(a)
    np.testing.assert_array_equal(causal, np.where(np.tri(128, dtype=bool), a, np.float32(-9984.0)))
    np.testing.assert_array_equal(ramp, np.arange(128 * 64).reshape(128, 64))


def test_bn_stats_chunks_and_bn_aggr_give_mean_and_variance():
    a = _f32(128, 1024)

    @nki.jit
    def kernel(x):
        out = nl.ndarray((128, 2), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        fmax = nl.tile_size.bn_stats_fmax
        chunks = x.shape[1] // fmax
        stats = nl.ndarray((128, chunks * 6), dtype=nl.float32)
        for c in nl.affine_range(chunks):
            stats[:, nl.ds(c * 6, 6)] = nisa.bn_stats(t[:, nl.ds(c * fmax, fmax)])
        nl.store(out, nisa.bn_aggr(stats))
        return out

    out = kernel(a)
    np.testing.assert_allclose(out[:, 0], a.astype(np.float64).mean(1), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out[:, 1], a.astype(np.float64).var(1), rtol=1e-4, atol=1e-5)


def test_loop_reduce_max_over_affine_range():
    a = _f32(4, 128, 32)

    @nki.jit
    def kernel(x):
        out = nl.ndarray((128, 32), dtype=nl.float32, buffer=nl.shared_hbm)
        best = nl.full((128, 32), -1e30, dtype=nl.float32)
        for i in nl.affine_range(4):
            best = nl.loop_reduce(nl.load(x[i]), op=np.maximum, loop_indices=[i], dtype=nl.float32)
        nl.store(out, best)
        return out

    np.testing.assert_array_equal(kernel(a), a.max(0))


def test_dropout_and_rand_are_deterministic_and_dropout_does_not_rescale():
    a = _f32(128, 64)

    @nki.jit
    def kernel(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        r = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nl.dropout(nl.load(x), rate=0.25))
        nl.random_seed(seed=7)
        nl.store(r, nl.rand((128, 64), dtype=nl.float32))
        return out, r

    o1, r1 = kernel(a)
    o2, r2 = kernel(a)
    np.testing.assert_array_equal(o1, o2)
    np.testing.assert_array_equal(r1, r2)
    kept = o1 != 0
    assert 0.65 < kept.mean() < 0.85
    np.testing.assert_array_equal(o1[kept], a[kept])  # NKI dropout zeroes, it does not rescale
    assert r1.min() >= 0.0
    assert r1.max() < 1.0


def test_benchmark_reports_latency_percentiles():
    def kernel(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.exp(nl.load(x)))
        return out

    bench = nki.benchmark(warmup=2, iters=5)(kernel)
    bench(_f32(128, 256))
    lat = bench.benchmark_result.nc_latency
    p50, p99 = lat.get_latency_percentile(50), lat.get_latency_percentile(99)
    assert 0 < p50 <= p99 < 1000
