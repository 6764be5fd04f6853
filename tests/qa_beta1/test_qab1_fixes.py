"""Regression tests for the Beta-1 front-end bugs this QA pass found and fixed."""

from __future__ import annotations

import inspect
import warnings

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np
import pytest
from qab1_helpers import expect_b1_error

from trnsim.errors import SimulationWarning

A = np.arange(128 * 64, dtype=np.float32).reshape(128, 64) + 1


def test_false_mask_on_matmul_assigned_to_sbuf_leaves_destination_untouched():
    # TensorE cannot write SBUF: the result goes through a PSUM tile and a copy; the copy used
    # to run even when the mask was false, filling the destination with uninitialized PSUM.
    @nki.jit
    def kernel(x):
        out = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        keep = nl.full((64, 64), 7.0, dtype=nl.float32, buffer=nl.sbuf)
        t = nl.load(x)
        for i in nl.sequential_range(2):
            keep[...] = nl.matmul(t, t, transpose_x=True, mask=(i < 0))
        nl.store(out, keep)
        return out

    np.testing.assert_array_equal(kernel(np.ones((128, 64), np.float32)), 7.0)


def test_partial_mask_on_transpose_into_sbuf_copies_only_computed_part():
    @nki.jit
    def kernel(x):
        out = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        z = nl.zeros((64, 128), dtype=nl.float32, buffer=nl.sbuf)
        i_p = nl.arange(128)[:, None]
        z[...] = nisa.nc_transpose(nl.load(x), mask=(i_p < 20))
        nl.store(out, z)
        return out

    want = np.zeros((64, 128), np.float32)
    want[:, :20] = A[:20].T
    np.testing.assert_array_equal(kernel(A), want)


def test_transpose_masks_are_over_the_input_tile_axes():
    # B1 documents masks as ranges "along one of the input tile axes": i_f < 20 on x[128, 64]
    # keeps input columns 0..19, i.e. rows 0..19 of the transposed tile.
    @nki.jit
    def kernel(x):
        o1 = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        o2 = nl.ndarray((64, 100), dtype=nl.float32, buffer=nl.shared_hbm)
        z = nl.zeros((64, 128), dtype=nl.float32, buffer=nl.sbuf)
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(64)[None, :]
        z[...] = nl.transpose(nl.load(x), mask=(i_f < 20))
        nl.store(o1, z)
        t = nl.load_transpose2d(x[i_p, i_f], mask=(i_p < 100))
        nl.store(o2, t[:, 0:100])
        return o1, o2

    o1, o2 = kernel(A)
    want = np.zeros((64, 128), np.float32)
    want[:20] = A.T[:20]
    np.testing.assert_array_equal(o1, want)
    np.testing.assert_array_equal(o2, A[:100].T)


def test_load_transpose2d_mask_keeps_a_ragged_source_in_bounds():
    src = A[:100]

    @nki.jit
    def kernel(x):
        out = nl.ndarray((64, 100), dtype=nl.float32, buffer=nl.shared_hbm)
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(64)[None, :]
        t = nl.load_transpose2d(x[i_p, i_f], mask=(i_p < 100))
        nl.store(out, t[:, 0:100])
        return out

    np.testing.assert_array_equal(kernel(src), src.T)


def test_matmul_mask_on_the_contraction_index_is_an_error_not_ignored():
    # It used to be applied to the result's partition axis (M = 64 < 100): silently a no-op.
    def kernel(x):
        res = nl.zeros((64, 96), dtype=nl.float32, buffer=nl.psum)
        i_k = nl.arange(128)[:, None]
        i_m = nl.arange(64)[None, :]
        i_n = nl.arange(96)[None, :]
        xs = nl.load(x[:, 0:64])
        ys = nl.load(x[:, 0:96])
        res[...] = nl.matmul(xs[i_k, i_m], ys[i_k, i_n], transpose_x=True, mask=(i_k < 100))  # BUG
        return x

    expect_b1_error(kernel, "err_unsupported_expression_in_mask", "iteration space", "slicing")


def test_nl_mean_with_a_free_axis_mask_divides_by_the_kept_count():
    x = np.random.default_rng(0).standard_normal((128, 32)).astype(np.float32)

    @nki.jit
    def kernel(a):
        m = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        v = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        i_f = nl.arange(32)[None, :]
        t = nl.load(a)
        nl.store(m, nl.mean(t, axis=1, keepdims=True, mask=(i_f < 20)))
        nl.store(v, nl.var(t, axis=1, keepdims=True, mask=(i_f < 20)))
        return m, v

    m, v = kernel(x)
    x64 = x[:, :20].astype(np.float64)
    np.testing.assert_allclose(m[:, 0], x64.mean(1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(v[:, 0], x64.var(1), rtol=1e-4, atol=1e-6)


def test_fractional_loop_bound_is_an_error_instead_of_dropping_the_tail():
    def kernel(x):
        out = nl.ndarray((300, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(300 / 128):  # BUG
            nl.store(out[i], nl.load(x[0:1, :]))
        return out

    expect_b1_error(kernel, None, "bounds must be integers", "not integral")

    @nki.jit
    def integral_float(x):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(512 / 256):  # 2.0 is fine
            nl.store(out[:, nl.ds(i * 256, 256)], nl.load(x[:, nl.ds(i * 256, 256)]))
        return out

    a = np.ones((128, 512), np.float32)
    np.testing.assert_array_equal(integral_float(a), a)


def test_returning_an_sbuf_tile_points_at_the_return_line():
    def kernel(x):
        t = nl.add(nl.load(x[0:64, :]), nl.load(x[0:1, :]))
        return t  # BUG

    expect_b1_error(kernel, None, "in sbuf", "nl.shared_hbm")


def test_warning_of_a_pending_call_points_at_the_call_line():
    @nki.jit
    def kernel(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        r = nl.arctan(nl.load(x))
        nl.store(out, r)
        return out

    lines, start = inspect.getsourcelines(kernel.fn)
    call = start + next(i for i, s in enumerate(lines) if "nl.arctan" in s)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kernel(np.full((128, 8), 3.0, np.float32))
    sim = [w for w in caught if issubclass(w.category, SimulationWarning)]
    assert sim, "expected a range warning for arctan(3.0)"
    assert {w.lineno for w in sim} == {call}


@pytest.mark.parametrize("rows", [64, 127])
def test_ragged_exp_tutorial_still_works(rows):
    x = np.random.default_rng(rows).standard_normal((rows, 40)).astype(np.float32)

    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        i_f = nl.arange(a.shape[1])[None, :]
        for p in nl.affine_range((a.shape[0] + 127) // 128):
            i_p = p * 128 + nl.arange(128)[:, None]
            t = nl.load(a[i_p, i_f], mask=(i_p < a.shape[0]))
            nl.store(
                out[i_p, i_f], value=nl.exp(t, mask=(i_p < a.shape[0])), mask=(i_p < a.shape[0])
            )
        return out

    np.testing.assert_allclose(kernel(x), np.exp(x.astype(np.float64)), rtol=1e-5)
