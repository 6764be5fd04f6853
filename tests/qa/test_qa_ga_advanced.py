"""QA: less common GA idioms from library kernels: accumulator chaining, top-8, gathers with
runtime offsets, dma_transpose, predicated copies, PSUM bank rules, activation table accuracy."""

from __future__ import annotations

import math

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from qa_helpers import expect_error
from source_paths import assert_no_internal_path

from trnsim.errors import ConstraintError, OutOfBoundsError


def _out(view):
    o = nl.ndarray(view.shape, dtype=view.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=o, src=view)
    return o


def sum_of_squares_in_chunks(x):
    """ScalarE accumulator registers carried over three activation calls, read out once."""
    p, n = x.shape
    c = n // 3
    t = nl.ndarray((p, n), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    sq = nl.ndarray((p, n), dtype=nl.float32, buffer=nl.sbuf)
    r = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(
        dst=sq[:, 0:c],
        op=nl.square,
        data=t[:, 0:c],
        reduce_op=nl.add,
        reduce_cmd=nisa.reduce_cmd.reset_reduce,
    )
    nisa.activation(
        dst=sq[:, c : 2 * c],
        op=nl.square,
        data=t[:, c : 2 * c],
        reduce_op=nl.add,
        reduce_cmd=nisa.reduce_cmd.reduce,
    )
    nisa.activation(
        dst=sq[:, 2 * c : n],
        op=nl.square,
        data=t[:, 2 * c : n],
        reduce_op=nl.add,
        reduce_res=r,
        reduce_cmd=nisa.reduce_cmd.reduce,
    )
    return _out(r)


def test_activation_accumulator_chain(rng):
    x = rng.standard_normal((64, 96)).astype(np.float32)
    out = nki.simulate(sum_of_squares_in_chunks)(x)
    np.testing.assert_allclose(out[:, 0], (x.astype(np.float64) ** 2).sum(1), rtol=1e-6)


def topk8(x):
    p, n = x.shape
    t = nl.ndarray((p, n), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    vals = nl.ndarray((p, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.max8(dst=vals, src=t)
    idx = nl.ndarray((p, 8), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.nc_find_index8(dst=idx, data=t, vals=vals)
    return _out(vals), _out(idx)


def test_max8_and_find_index8(rng):
    x = rng.standard_normal((32, 100)).astype(np.float32)
    vals, idx = nki.simulate(topk8)(x)
    order = np.argsort(-x, axis=1, kind="stable")[:, :8]
    np.testing.assert_array_equal(vals, np.take_along_axis(x, order, 1))
    np.testing.assert_array_equal(idx.astype(np.int64), order)


def scale_and_rowmax(x):
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    o = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    r = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar_reduce(
        dst=o, data=t, op0=nl.multiply, operand0=2.0, reduce_op=nl.maximum, reduce_res=r
    )
    return _out(o), _out(r)


def test_tensor_scalar_reduce(rng):
    x = rng.standard_normal((16, 40)).astype(np.float32)
    o, r = nki.simulate(scale_and_rowmax)(x)
    np.testing.assert_array_equal(o, x * 2)
    np.testing.assert_array_equal(r[:, 0], (x * 2).max(1))


def column_sums(x):
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    o = nl.ndarray((1, x.shape[1]), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_partition_reduce(dst=o, op=nl.add, data=t)
    return _out(o)


def test_tensor_partition_reduce(rng):
    x = rng.standard_normal((64, 24)).astype(np.float32)
    out = nki.simulate(column_sums)(x)
    np.testing.assert_allclose(out[0], x.astype(np.float64).sum(0), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- gathers (embedding lookup)


def embedding_ap(table, ids):
    n = ids.shape[0]
    d = table.shape[1]
    it = nl.ndarray((n, 1), dtype=ids.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=it, src=ids)
    rows = nl.ndarray((n, d), dtype=table.dtype, buffer=nl.sbuf)
    nisa.dma_copy(
        dst=rows, src=table.ap(pattern=[[d, n], [1, d]], offset=0, vector_offset=it, indirect_dim=0)
    )
    return _out(rows)


def embedding_vector_select(table, ids):
    n = ids.shape[0]
    it = nl.ndarray((n, 1), dtype=ids.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=it, src=ids)
    rows = nl.ndarray((n, table.shape[1]), dtype=table.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=rows, src=table.vector_select(0, it))
    return _out(rows)


@pytest.mark.parametrize("kernel", [embedding_ap, embedding_vector_select])
def test_embedding_gather(rng, kernel):
    table = rng.standard_normal((50, 16)).astype(np.float32)
    ids = rng.integers(0, 50, (32, 1)).astype(np.int32)
    out = nki.simulate(kernel)(table, ids)
    np.testing.assert_array_equal(out, table[ids[:, 0]])


def test_embedding_gather_out_of_range_index(rng):
    table = rng.standard_normal((50, 16)).astype(np.float32)
    ids = rng.integers(0, 50, (32, 1)).astype(np.int32)
    ids[3, 0] = 77
    with pytest.raises(OutOfBoundsError, match="77") as exc:
        nki.simulate(embedding_ap)(table, ids)
    assert_no_internal_path(str(exc.value))
    assert "oob_mode" in exc.value.message


def window_at_runtime_offset(table, start):
    s = nl.ndarray((1, 1), dtype=start.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=start)
    rows = nl.ndarray((4, table.shape[1]), dtype=table.dtype, buffer=nl.sbuf)
    nisa.dma_copy(
        dst=rows,
        src=table.ap(pattern=[[table.shape[1], 4], [1, table.shape[1]]], offset=0, scalar_offset=s),
    )
    return _out(rows)


def test_scalar_offset_window(rng):
    table = rng.standard_normal((50, 16)).astype(np.float32)
    out = nki.simulate(window_at_runtime_offset)(table, np.array([[7]], np.int32))
    np.testing.assert_array_equal(out, table[7:11])


def test_scalar_offset_overflow_message(rng):
    table = rng.standard_normal((50, 16)).astype(np.float32)
    with pytest.raises(OutOfBoundsError) as exc:
        nki.simulate(window_at_runtime_offset)(table, np.array([[48]], np.int32))
    assert "48 is outside [0, 50)" not in exc.value.message


def transpose_in_dma(x):
    o = nl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(dst=o, src=x)
    return _out(o)


def test_dma_transpose_bf16(rng):
    x = rng.standard_normal((16, 64)).astype(ml_dtypes.bfloat16)
    out = nki.simulate(transpose_in_dma)(x)
    np.testing.assert_array_equal(out, x.T)


def keep_positive(x):
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    pred = nl.ndarray(x.shape, dtype=nl.uint8, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=pred, data=t, op0=nl.greater, operand0=0.0)
    o = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=o, value=-1.0)
    nisa.tensor_copy_predicated(dst=o, src=t, predicate=pred)
    return _out(o)


def test_tensor_copy_predicated(rng):
    x = rng.standard_normal((16, 32)).astype(np.float32)
    out = nki.simulate(keep_positive)(x)
    np.testing.assert_array_equal(out, np.where(x > 0, x, -1.0))


def reverse_quadrant(x):
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    o = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.nc_stream_shuffle(dst=o, src=t, shuffle_mask=list(range(31, -1, -1)))
    return _out(o)


def test_nc_stream_shuffle_reverses_quadrant(rng):
    x = rng.standard_normal((32, 8)).astype(np.float32)
    out = nki.simulate(reverse_quadrant)(x)
    np.testing.assert_array_equal(out, x[::-1])


# ---------------------------------------------------------------- PSUM bank rule


def k_matmul_across_banks(a):
    s = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.sbuf)
    m = nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.memset(dst=s, value=1.0)
    nisa.memset(dst=m, value=1.0)
    ps = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=ps[:, 256:768], stationary=s, moving=m)  # BUG
    return a


def test_matmul_result_crossing_psum_bank_on_trn2():
    expect_error(k_matmul_across_banks, ConstraintError, "bank", "2048", "trn2", chip="trn2")


def test_matmul_result_crossing_psum_bank_is_legal_on_trn3():
    nki.simulate(k_matmul_across_banks, chip="trn3")(np.ones((1, 1), np.float32))


# ---------------------------------------------------------------- partition striding


def k_partition_stride_compute(a):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    u = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=u, src=t[::2, :])  # BUG
    return a


def test_partition_stride_rejected_on_compute_engines():
    expect_error(k_partition_stride_compute, ConstraintError, "partition", "step|stride")


def k_partition_reverse_compute(a):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    u = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=u, src=t[::-1, :])  # BUG
    return a


def test_partition_reverse_rejected_on_compute_engines():
    expect_error(k_partition_reverse_compute, ConstraintError, "partition")


def test_partition_stride_is_fine_for_dma(rng):
    def kernel(x):
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        o = nl.ndarray((x.shape[0] // 2, x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=o, src=t[::2, :])
        return o

    x = rng.standard_normal((16, 8)).astype(np.float32)
    np.testing.assert_array_equal(nki.simulate(kernel)(x), x[::2])


# ---------------------------------------------------------------- activation table accuracy

_ERF = np.vectorize(math.erf)
_ACT = {
    "exp": (np.exp, False),
    "log": (np.log, True),
    "sqrt": (np.sqrt, True),
    "rsqrt": (lambda v: 1 / np.sqrt(v), True),
    "reciprocal": (lambda v: 1 / v, True),
    "sigmoid": (lambda v: 1 / (1 + np.exp(-v)), False),
    "tanh": (np.tanh, False),
    "relu": (lambda v: np.maximum(v, 0), False),
    "gelu": (lambda v: 0.5 * v * (1 + _ERF(v / np.sqrt(2))), False),
    "gelu_apprx_tanh": (
        lambda v: 0.5 * v * (1 + np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v**3))),
        False,
    ),
    "silu": (lambda v: v / (1 + np.exp(-v)), False),
    "softplus": (lambda v: np.log1p(np.exp(v)), False),
    "erf": (_ERF, False),
    "sin": (np.sin, False),
    "abs": (np.abs, False),
    "square": (np.square, False),
}


@pytest.mark.parametrize("name", sorted(_ACT))
def test_activation_function_accuracy(name):
    ref, positive = _ACT[name]

    def kernel(x):
        t = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        o = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=o, op=getattr(nl, name), data=t, scale=0.5, bias=None)
        return _out(o)

    rng = np.random.default_rng(3)
    lo, hi = (0.2, 8.0) if positive else (-6.0, 6.0)
    x = rng.uniform(lo, hi, (16, 64)).astype(np.float32)
    out = nki.simulate(kernel)(x)
    np.testing.assert_allclose(out, ref(0.5 * x.astype(np.float64)), rtol=2e-6, atol=1e-6)
