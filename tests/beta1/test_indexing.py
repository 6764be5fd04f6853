"""Beta-1 indexing: nl.arange / nl.mgrid / nl.ds / affine expressions as strided views, masks,
block dimensions, assignment into pre-declared tiles, and the tensor's view methods."""

from __future__ import annotations

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np
import pytest
from b1_testing import check_located, tile_fn

from trnsim.errors import ConstraintError, OutOfBoundsError

RNG = np.random.default_rng(0)
X = RNG.standard_normal((128, 64)).astype(np.float32)


def _load_store(fn, *arrays, shape, dtype=np.float32):
    @nki.jit
    def kernel(*ins):
        out = nl.ndarray(shape, dtype=dtype, buffer=nl.shared_hbm)
        nl.store(out, value=fn(*ins))
        return out

    return kernel(*arrays)


def test_arange_strided_free_access():
    """Even and odd columns through 2 * arange and 2 * arange + 1."""
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(32)[None, :]
    even = _load_store(lambda x: nl.load(x[i_p, 2 * i_f]), X, shape=(128, 32))
    odd = _load_store(lambda x: nl.load(x[i_p, 2 * i_f + 1]), X, shape=(128, 32))
    np.testing.assert_array_equal(even, X[:, 0::2])
    np.testing.assert_array_equal(odd, X[:, 1::2])


def test_mgrid_unpack_and_attributes():
    def body(x):
        i_p, i_f = nl.mgrid[0:64, 0:16]
        g = nl.mgrid[0:64, 0:16]
        a = nl.load(x[i_p + 10, i_f + 3])
        b = nl.load(x[g.p + 10, g.x + 3])
        return nl.subtract(a, b)

    np.testing.assert_array_equal(_load_store(body, X, shape=(64, 16)), np.zeros((64, 16)))
    got = _load_store(
        lambda x: nl.load(x[nl.mgrid[0:64, 0:16].p, nl.mgrid[0:64, 0:16].x]), X, shape=(64, 16)
    )
    np.testing.assert_array_equal(got, X[:64, :16])


def test_basic_indexing_slices_ints_ds_and_negative():
    got = _load_store(lambda x: nl.load(x[10:74, nl.ds(8, 16)]), X, shape=(64, 16))
    np.testing.assert_array_equal(got, X[10:74, 8:24])
    got = _load_store(lambda x: nl.load(x[:, -4:]), X, shape=(128, 4))
    np.testing.assert_array_equal(got, X[:, -4:])
    got = _load_store(lambda x: nl.load(x[0:128, ::4]), X, shape=(128, 16))
    np.testing.assert_array_equal(got, X[:, ::4])


def test_loop_variable_affine_indexing():
    @nki.jit
    def kernel(x):
        out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(16)[None, :]
        for j in nl.affine_range(4):
            t = nl.load(x[i_p, j * 16 + i_f])
            nl.store(out[i_p, (3 - j) * 16 + i_f], value=t)
        return out

    want = np.concatenate([X[:, 48:64], X[:, 32:48], X[:, 16:32], X[:, 0:16]], axis=1)
    np.testing.assert_array_equal(kernel(X), want)


def test_partition_aligned_broadcast_of_reduced_tile():
    """A (P, 1) reduction combines with its (P, F) source, by functions and operators."""
    got = tile_fn(lambda t: t - nl.max(t, axis=1), X)
    np.testing.assert_allclose(got, X - X.max(axis=1, keepdims=True))
    got = tile_fn(lambda t: nl.multiply(nl.sum(t, axis=1), t), X)
    np.testing.assert_allclose(got, X.sum(axis=1, keepdims=True) * X, rtol=1e-5, atol=1e-5)


def test_free_axis_broadcast_of_tile_tile():
    a = RNG.standard_normal((32, 4, 1)).astype(np.float32)
    b = RNG.standard_normal((32, 1, 8)).astype(np.float32)
    np.testing.assert_allclose(tile_fn(lambda x, y: x + y, a, b), a + b)


def test_block_dims_with_par_dim():
    @nki.jit
    def kernel(x):
        out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
        buf = nl.ndarray((4, nl.par_dim(128), 16), dtype=x.dtype, buffer=nl.sbuf)
        i_p, i_f = nl.mgrid[0:128, 0:16]
        for b in nl.affine_range(4):
            buf[b, i_p, i_f] = nl.load(x[i_p, b * 16 + i_f])
        for b in nl.affine_range(4):
            nl.store(out[i_p, (3 - b) * 16 + i_f], value=buf[b])
        return out

    want = np.concatenate([X[:, 48:], X[:, 32:48], X[:, 16:32], X[:, :16]], axis=1)
    np.testing.assert_array_equal(kernel(X), want)


def test_mask_rectangular_leaves_rest_untouched():
    @nki.jit
    def kernel(x):
        out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(64)[None, :]
        r = nl.zeros((128, 64), dtype=nl.float32)
        r[...] = nl.exp(nl.load(x), mask=(i_p < 10) & (i_f >= 4))
        nl.store(out, value=r)
        return out

    want = np.zeros_like(X)
    want[:10, 4:] = np.exp(X[:10, 4:])
    np.testing.assert_allclose(kernel(X), want, rtol=1e-6)


def test_mask_multi_axis_triangle():
    @nki.jit
    def kernel(x):
        out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(64)[None, :]
        r = nl.full((128, 64), -1.0, dtype=nl.float32)
        r[...] = nl.add(nl.load(x), 1.0, mask=(i_f <= i_p))
        nl.store(out, value=r)
        return out

    want = np.where(np.tril(np.ones((128, 64), bool)), X + 1, -1.0)
    np.testing.assert_allclose(kernel(X), want)


def test_mask_with_program_id_and_ragged_rows():
    x = RNG.standard_normal((200, 32)).astype(np.float32)

    @nki.jit
    def kernel(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        rows = nl.program_id(0) * 128 + nl.arange(128)[:, None]
        i_f = nl.arange(32)[None, :]
        valid = rows < x.shape[0]
        nl.store(out[rows, i_f], value=nl.load(x[rows, i_f], mask=valid) * 2.0, mask=valid)
        return out

    np.testing.assert_allclose(kernel[2](x), 2 * x)


def test_false_mask_skips_instruction():
    @nki.jit
    def kernel(x):
        out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
        r = nl.zeros((128, 64), dtype=nl.float32)
        r[...] = nl.exp(nl.load(x), mask=(3 < 2))
        nl.store(out, value=r)
        return out

    np.testing.assert_array_equal(kernel(X), np.zeros_like(X))


def test_assignment_into_predeclared_tile_and_scalar_fill():
    @nki.jit
    def kernel(x):
        out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((128, 64), dtype=nl.float32)
        t[:, 0:32] = nl.load(x[:, 0:32])
        t[:, 32:64] = 7.0
        nl.store(out, value=t)
        return out

    want = X.copy()
    want[:, 32:] = 7.0
    np.testing.assert_array_equal(kernel(X), want)


def test_psum_accumulation_with_plus_equals():
    a = RNG.standard_normal((256, 64)).astype(np.float32)
    b = RNG.standard_normal((256, 96)).astype(np.float32)

    @nki.jit
    def kernel(a, b):
        out = nl.ndarray((64, 96), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((64, 96), dtype=nl.float32, buffer=nl.psum)
        for k in nl.affine_range(2):
            acc += nl.matmul(
                nl.load(a[k * 128 : (k + 1) * 128]),
                nl.load(b[k * 128 : (k + 1) * 128]),
                transpose_x=True,
            )
        nl.store(out, value=acc)
        return out

    np.testing.assert_allclose(kernel(a, b), a.T @ b, rtol=1e-4, atol=1e-4)


def test_in_place_operators_on_sbuf():
    @nki.jit
    def kernel(x):
        out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        t += 1.0
        t *= 2.0
        t -= x[0:1, 0:1].shape[0]
        t /= 4.0
        t[:, 0:8] += nl.load(x[:, 0:8])
        nl.store(out, value=t)
        return out

    want = ((X + 1) * 2 - 1) / 4
    want[:, :8] += X[:, :8]
    np.testing.assert_allclose(kernel(X), want, rtol=1e-6)


def test_tensor_views_and_attributes():
    @nki.jit
    def kernel(x):
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        assert x.shape == (128, 64) and x.ndim == 2 and x.itemsize == 4
        assert x.dtype == nl.float32 and x.buffer is nl.shared_hbm
        x.assert_shape((128, 64))
        t = nl.load(x.reshape((128, 2, 32)))
        assert t.buffer is nl.sbuf and t.shape == (128, 2, 32)
        e = t.expand_dims(3)
        assert e.shape == (128, 2, 32, 1)
        bits = nl.load(x).view(nl.int32)
        back = nl.copy(bits).view(nl.float32)
        h = nl.load(x).astype(nl.float16)
        assert h.dtype == nl.float16
        nl.store(out, value=nl.add(back, nl.subtract(t.reshape((128, 64)), h)))
        return out

    half = X.astype(np.float16).astype(np.float32)
    np.testing.assert_allclose(kernel(X), X + (X - half), rtol=1e-6)


def test_shapes_are_checked_at_trace_time():
    def kernel(x):
        return nl.load(x[nl.arange(128)[:, None], nl.arange(4096)[None, :]])

    with pytest.raises(
        OutOfBoundsError,
        match=r"index range \[0, 4095\] exceed dimension size "
        r"of 64",
    ) as exc:
        nki.simulate_kernel(kernel, X)
    check_located(exc, kernel, "nl.load(")


def test_partition_dim_striding_is_rejected():
    def kernel(x):
        t = nl.load(x[nl.arange(64)[:, None], nl.arange(8)[None, :]])
        return t[2 * nl.arange(32)[:, None], nl.arange(8)[None, :]]

    with pytest.raises(ConstraintError, match="partition-dim striding") as exc:
        nki.simulate_kernel(kernel, X)
    check_located(exc, kernel, "2 * nl.arange")
