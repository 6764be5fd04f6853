"""QA: GA NkiTensor views (slices, nl.ds, .ap(), reshape, permute, broadcast) and dma_copy
in both directions, with casts."""

from __future__ import annotations

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest


def _copy_out(view, shape, dtype=None):
    """Copy an SBUF view to a fresh shared-HBM tensor of `shape`."""
    out = nl.ndarray(shape, dtype=dtype or view.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=view)
    return out


def test_hbm_step_slice_and_negative_index(rng):
    def kernel(x):
        m, n = x.shape
        t = nl.ndarray((m, n // 2), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[:, 1::2])  # odd columns
        last = nl.ndarray((1, n), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=last, src=x[-1:, :])
        return _copy_out(t, (m, n // 2)), _copy_out(last, (1, n))

    x = rng.standard_normal((16, 10)).astype(np.float32)
    odd, last = nki.simulate(kernel)(x)
    np.testing.assert_array_equal(odd, x[:, 1::2])
    np.testing.assert_array_equal(last, x[-1:, :])


def test_hbm_ap_pattern_reads_strided(rng):
    def kernel(x):
        m, n = x.shape
        t = nl.ndarray((m // 2, n // 2), dtype=x.dtype, buffer=nl.sbuf)
        # every other row, every other column, starting at (1, 0)
        nisa.dma_copy(dst=t, src=x.ap(pattern=[[2 * n, m // 2], [2, n // 2]], offset=n))
        return _copy_out(t, (m // 2, n // 2))

    x = rng.standard_normal((8, 12)).astype(np.float32)
    out = nki.simulate(kernel)(x)
    np.testing.assert_array_equal(out, x[1::2, 0::2])


def test_sbuf_ap_pattern_reinterprets_free_layout(rng):
    def kernel(x):
        p, n = x.shape
        t = nl.ndarray((p, n), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        # view the free axis as [n//4, 4] transposed -> [4, n//4]
        v = t.ap(pattern=[[n, p], [1, 4], [4, n // 4]])
        o = nl.ndarray((p, 4, n // 4), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=o, src=v)
        return _copy_out(o, (p, 4, n // 4))

    x = rng.standard_normal((32, 20)).astype(np.float32)
    out = nki.simulate(kernel)(x)
    np.testing.assert_array_equal(out, x.reshape(32, 5, 4).transpose(0, 2, 1))


def test_hbm_permute_view_dma_transpose(rng):
    def kernel(x):
        b, m, n = x.shape
        t = nl.ndarray((n, b, m), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x.permute((2, 0, 1)))
        return _copy_out(t, (n, b, m))

    x = rng.standard_normal((3, 5, 7)).astype(np.float32)
    out = nki.simulate(kernel)(x)
    np.testing.assert_array_equal(out, x.transpose(2, 0, 1))


def test_hbm_reshape_then_ds(rng):
    def kernel(x):
        (n,) = x.shape
        v = x.reshape((n // 64, 64))
        t = nl.ndarray((4, 64), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=v[nl.ds(2, 4), :])
        return _copy_out(t, (4, 64))

    x = rng.standard_normal(640).astype(np.float32)
    out = nki.simulate(kernel)(x)
    np.testing.assert_array_equal(out, x.reshape(10, 64)[2:6])


def test_sbuf_free_broadcast_operand(rng):
    def kernel(x, col):
        p, n = x.shape
        t = nl.ndarray((p, n), dtype=x.dtype, buffer=nl.sbuf)
        c = nl.ndarray((p, 1), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.dma_copy(dst=c, src=col)
        o = nl.ndarray((p, n), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=o, data1=t, data2=c.broadcast(1, n), op=nl.subtract)
        return _copy_out(o, (p, n))

    x = rng.standard_normal((64, 30)).astype(np.float32)
    col = rng.standard_normal((64, 1)).astype(np.float32)
    out = nki.simulate(kernel)(x, col)
    np.testing.assert_array_equal(out, x - col)


def test_sbuf_integer_index_keeps_partition_dim(rng):
    def kernel(x):
        p, a, b = x.shape
        t = nl.ndarray((p, a, b), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        v = t[:, 2, :]  # drops the middle free dim -> (p, b)
        assert tuple(v.shape) == (p, b)
        row = t[3]  # integer on the partition dim keeps a size-1 partition dim
        assert next(iter(row.shape)) == 1
        return _copy_out(v, (p, b))

    x = rng.standard_normal((8, 4, 6)).astype(np.float32)
    out = nki.simulate(kernel)(x)
    np.testing.assert_array_equal(out, x[:, 2, :])


@pytest.mark.parametrize(
    ("src_dtype", "mid_dtype"),
    [
        (np.float32, nl.bfloat16),
        (np.float32, nl.float16),
        (np.float32, nl.float8_e4m3),
        (np.float32, nl.float8_e5m2),
    ],
)
def test_dma_cast_roundtrip(rng, src_dtype, mid_dtype):
    def kernel(x):
        p, n = x.shape
        t = nl.ndarray((p, n), dtype=mid_dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)  # HBM fp32 -> SBUF low precision (cast)
        out = nl.ndarray((p, n), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)  # SBUF low precision -> HBM fp32 (cast back)
        return out

    x = (rng.standard_normal((32, 64)) * 3).astype(src_dtype)
    out = nki.simulate(kernel)(x)
    np_mid = {
        nl.bfloat16: ml_dtypes.bfloat16,
        nl.float16: np.float16,
        nl.float8_e5m2: ml_dtypes.float8_e5m2,
    }.get(mid_dtype)
    if np_mid is not None:
        np.testing.assert_array_equal(out, x.astype(np_mid).astype(np.float32))
    else:  # fp8 e4m3 (trn3 default: e4m3fn or legacy e4m3; both round-to-nearest, 3 mantissa bits)
        np.testing.assert_allclose(out, x, rtol=2**-4 + 1e-6, atol=2**-9)


def test_dma_sbuf_to_sbuf_partition_shift(rng):
    def kernel(x):
        p, n = x.shape
        a = nl.ndarray((p, n), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=x)
        b = nl.ndarray((p, n), dtype=x.dtype, buffer=nl.sbuf)
        nisa.memset(dst=b, value=0.0)
        nisa.dma_copy(dst=b[1:p, :], src=a[0 : p - 1, :])  # DMA can shift partitions
        return _copy_out(b, (p, n))

    x = rng.standard_normal((16, 8)).astype(np.float32)
    out = nki.simulate(kernel)(x)
    ref = np.zeros_like(x)
    ref[1:] = x[:-1]
    np.testing.assert_array_equal(out, ref)


def test_dma_different_shape_same_count(rng):
    def kernel(x):
        t = nl.ndarray((4, 24), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)  # x is (8, 12): same element count, different shape
        return _copy_out(t, (4, 24))

    x = rng.standard_normal((8, 12)).astype(np.float32)
    out = nki.simulate(kernel)(x)
    np.testing.assert_array_equal(out, x.reshape(4, 24))


def test_uninitialised_sbuf_is_nan_sentinel():
    def kernel(x):
        t = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.sbuf)
        return _copy_out(t, (4, 4))

    out = nki.simulate(kernel)(np.zeros((1, 1), np.float32))
    assert np.isnan(out).all()


def test_input_updated_in_place(rng):
    def kernel(x):
        p, n = x.shape
        t = nl.ndarray((p, n), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
        nisa.dma_copy(dst=x, src=t)

    x = rng.standard_normal((8, 8)).astype(np.float32)
    before = x.copy()
    nki.simulate(kernel)(x)
    np.testing.assert_array_equal(x, before + 1.0)


def test_nl_zeros_full_and_tensor_copy_cast():
    def kernel(dummy):
        z = nl.zeros((8, 16), dtype=nl.float32, buffer=nl.sbuf)
        f = nl.full((8, 16), 2.5, dtype=nl.bfloat16, buffer=nl.sbuf)
        s = nl.ndarray((8, 16), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=s, data1=z, data2=f, op=nl.add)
        return _copy_out(s, (8, 16))

    out = nki.simulate(kernel)(np.zeros((1, 1), np.float32))
    np.testing.assert_array_equal(out, np.full((8, 16), 2.5, np.float32))


def test_psum_tile_sliced_in_two_banks(rng):
    def kernel(a_t, b):
        k, m = a_t.shape
        _, n = b.shape
        at = nl.ndarray((k, m), dtype=a_t.dtype, buffer=nl.sbuf)
        bt = nl.ndarray((k, n), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=at, src=a_t)
        nisa.dma_copy(dst=bt, src=b)
        ps = nl.ndarray((m, 2, 512), dtype=nl.float32, buffer=nl.psum)  # two banks
        for j in nl.affine_range(2):
            nisa.nc_matmul(dst=ps[:, j, :], stationary=at, moving=bt[:, nl.ds(j * 512, 512)])
        res = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
        for j in nl.affine_range(2):
            nisa.tensor_copy(dst=res[:, nl.ds(j * 512, 512)], src=ps[:, j, :])
        return _copy_out(res, (m, n))

    a_t = rng.standard_normal((64, 32)).astype(np.float32)
    b = rng.standard_normal((64, 1024)).astype(np.float32)
    out = nki.simulate(kernel)(a_t, b)
    np.testing.assert_allclose(out, a_t.astype(np.float64).T @ b, rtol=1e-4, atol=1e-4)
