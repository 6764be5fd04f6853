"""GpSimd instructions: semantics vs numpy computed another way, one error per rule, no PSUM."""

from __future__ import annotations

import ml_dtypes
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from select_helpers import load, op, raises_at, record, sim, store

from trnsim.errors import KernelError, OutOfBoundsError
from trnsim.spec import engine_access, instruction_specs

# ---------------------------------------------------------------- no PSUM, ever

GPSIMD_FAMILY = (
    "tensor_partition_reduce",
    "local_gather",
    "nc_n_gather",
    "sequence_bounds",
    "nonzero_with_count",
    "topk",
    "affine_select",
)


def test_gpsimd_records_never_name_psum():
    """engines.yaml keeps GpSimd off PSUM, and no GpSimd record offers PSUM to an operand."""
    access = engine_access()["gpsimd"]
    assert "psum" not in access["read"]
    assert "psum" not in access["write"]
    specs = instruction_specs()
    for name in GPSIMD_FAMILY:
        assert specs[name].engines == ("gpsimd",)
        for o in specs[name].operands.values():
            assert "psum" not in o.spaces, f"{name}.{o.name}"


def _psum_kernels():
    def partition_reduce():
        ps = nl.ndarray((16, 8), nl.float32, buffer=nl.psum)
        d = nl.ndarray((1, 8), nl.float32, buffer=nl.sbuf)
        nisa.tensor_partition_reduce(d, op("add"), ps)  # <- rule

    def local_gather():
        src = nl.ndarray((16, 8), nl.float32, buffer=nl.sbuf)
        idx = nl.ndarray((16, 1), nl.uint16, buffer=nl.sbuf)
        ps = nl.ndarray((16, 16), nl.float32, buffer=nl.psum)
        nisa.local_gather(ps, src, idx)  # <- rule

    def n_gather():
        ps = nl.ndarray((4, 8), nl.float32, buffer=nl.psum)
        idx = nl.ndarray((4, 2), nl.uint32, buffer=nl.sbuf)
        d = nl.ndarray((4, 2), nl.float32, buffer=nl.sbuf)
        nisa.nc_n_gather(d, ps, idx)  # <- rule

    def bounds():
        ps = nl.ndarray((1, 8), nl.float32, buffer=nl.psum)
        d = nl.ndarray((1, 2, 8), nl.float32, buffer=nl.sbuf)
        nisa.sequence_bounds(d, ps)  # <- rule

    def nonzero():
        s = nl.ndarray((16, 8), nl.int32, buffer=nl.sbuf)
        ps = nl.ndarray((16, 9), nl.int32, buffer=nl.psum)
        nisa.nonzero_with_count(ps, s)  # <- rule

    def top():
        s = nl.ndarray((16, 2), nl.bfloat16, buffer=nl.sbuf)
        i = nl.ndarray((16, 8), nl.uint32, buffer=nl.sbuf)
        ps = nl.ndarray((16, 8), nl.bfloat16, buffer=nl.psum)
        nisa.topk(ps, i, s, 20)  # <- rule

    return [partition_reduce, local_gather, n_gather, bounds, nonzero, top]


@pytest.mark.parametrize("kernel", _psum_kernels(), ids=lambda k: k.__name__)
def test_gpsimd_rejects_psum_operands(kernel):
    raises_at(kernel, match=r"operand '\w+' is in psum; allowed: sbuf")


# ---------------------------------------------------------------- tensor_partition_reduce


def test_partition_reduce_add_max_average(rng):
    x = rng.standard_normal((128, 32, 4), dtype=np.float32)

    def kernel(a):
        t = load(a)
        outs = []
        for o in ("add", "maximum", "average"):
            d = nl.ndarray((1, 32, 4), nl.float32, buffer=nl.sbuf)
            nisa.tensor_partition_reduce(d, op(o), t)
            outs.append(store(d))
        d = nl.ndarray((1, 32, 4), nl.float32, buffer=nl.sbuf)
        nisa.tensor_partition_reduce(d, np.add, t)  # Beta-1 style numpy op
        outs.append(store(d))
        return tuple(outs)

    s, m, avg, s_np = sim(kernel, x)
    ref = x.astype(np.float64)
    np.testing.assert_allclose(s[0], ref.sum(axis=0), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(m[0], x.max(axis=0))
    np.testing.assert_allclose(avg[0], ref.mean(axis=0), rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(s_np, s)


def test_partition_reduce_integers_exact(rng):
    """Integer operands: bitwise ops on the bits, add exact beyond 2^24 (GpSimd integer ALU)."""
    x = rng.integers(-(2**31), 2**31 - 1, (16, 12), dtype=np.int64).astype(np.int32)
    big = rng.integers(2**25, 2**26, (16, 12)).astype(np.int32)

    def kernel(a, b):
        ta, tb = load(a), load(b)
        outs = []
        for o, t in (("bitwise_or", ta), ("bitwise_and", ta), ("add", tb)):
            d = nl.ndarray((1, 12), nl.int32, buffer=nl.sbuf)
            nisa.tensor_partition_reduce(d, op(o), t)
            outs.append(store(d))
        return tuple(outs)

    o_or, o_and, o_add = sim(kernel, x, big)
    np.testing.assert_array_equal(o_or[0], np.bitwise_or.reduce(x, axis=0))
    np.testing.assert_array_equal(o_and[0], np.bitwise_and.reduce(x, axis=0))
    np.testing.assert_array_equal(o_add[0], big.astype(np.int64).sum(axis=0))


def test_partition_reduce_rules():
    x = np.zeros((16, 8), np.float32)

    def two_rows(a):
        t = load(a)
        d = nl.ndarray((2, 4), nl.float32, buffer=nl.sbuf)
        nisa.tensor_partition_reduce(d, op("add"), t[:, 0:4])  # <- rule

    def bad_op(a):
        t = load(a)
        d = nl.ndarray((1, 8), nl.float32, buffer=nl.sbuf)
        nisa.tensor_partition_reduce(d, op("subtract"), t)  # <- rule

    def bits_of_floats(a):
        t = load(a)
        d = nl.ndarray((1, 8), nl.float32, buffer=nl.sbuf)
        nisa.tensor_partition_reduce(d, op("bitwise_or"), t)  # <- rule

    raises_at(
        two_rows,
        x,
        match=r"tensor_partition_reduce: operand 'dst' has 2 partitions; "
        r"the reduction across partitions writes 1 partition",
    )
    raises_at(
        bad_op,
        x,
        match=r"tensor_partition_reduce: op='subtract' is not supported; "
        r"allowed: add, maximum, bitwise_or, bitwise_and, average",
    )
    raises_at(
        bits_of_floats,
        x,
        match=r"op=bitwise_or needs integer operands; 'dst' has dtype "
        r"float32",
    )


# ---------------------------------------------------------------- local_gather


def _local_gather_ref(src, index, k, nv):
    """Per 16-partition core: indices in partition-major order, k elements from each."""
    p = src.shape[0]
    flat = src.reshape(p, -1)
    out = np.empty((p, nv, k), src.dtype)
    for c in range(p // 16):
        block = index[16 * c : 16 * c + 16]
        order = [block[r, col] for col in range(block.shape[1]) for r in range(16)][:nv]
        for j, i in enumerate(order):
            out[16 * c : 16 * c + 16, j] = flat[16 * c : 16 * c + 16, i : i + k]
    return out


def test_local_gather_aws_example(rng):
    """AWS's example: (128, 512, 4) source, one (16, 4) index block replicated on 8 cores."""
    src = rng.random((128, 512, 4), dtype=np.float32)
    per_core = rng.integers(0, 512, (16, 4)).astype(np.uint16)
    index = np.tile(per_core, (8, 1))
    hw_index = (index * 4).astype(np.uint16)  # element offsets of 4-element groups

    def kernel(s, i):
        ts, ti = load(s), load(i)
        d = nl.ndarray((128, 4, 16, 4), nl.float32, buffer=nl.sbuf)
        nisa.local_gather(d, ts, ti, num_elem_per_idx=4, num_valid_indices=64)
        return store(d)

    want = np.empty((128, 64, 4), np.float32)
    for c in range(8):
        rows = slice(16 * c, 16 * c + 16)
        want[rows] = np.take(src[rows], index[rows].flatten(order="F")[:64], axis=1)
    np.testing.assert_array_equal(sim(kernel, src, hw_index), want.reshape(128, 4, 16, 4))


def test_local_gather_per_core_indices_default_count_and_record(rng):
    src = rng.standard_normal((32, 40)).astype(ml_dtypes.bfloat16)
    index = rng.integers(0, 39, (32, 3)).astype(np.uint16)

    def kernel(s, i):
        ts, ti = load(s), load(i)
        d = nl.ndarray((32, 96), nl.bfloat16, buffer=nl.sbuf)
        nisa.local_gather(d, ts, ti, num_elem_per_idx=2)
        return store(d)

    got = sim(kernel, src, index)
    want = _local_gather_ref(src, index, 2, 48).reshape(32, 96)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))  # bit exact
    instr = record(kernel, src, index, opcode="local_gather")
    assert instr.attrs["num_valid_indices"] == 48
    assert instr.attrs["num_elem_per_idx"] == 2


def test_local_gather_rules():
    s16 = np.zeros((16, 64), np.float32)

    def not_16(a):
        t = load(a)
        i = nl.ndarray((8, 1), nl.uint16, buffer=nl.sbuf)
        nisa.local_gather(t[0:8, 0:16], t[0:8, :], i)  # <- rule

    def bad_k(a):
        t = load(a)
        i = nl.ndarray((16, 1), nl.uint16, buffer=nl.sbuf)
        nisa.local_gather(t[:, 0:48], t, i, num_elem_per_idx=3)  # <- rule

    def bad_index_dtype(a):
        t = load(a)
        i = nl.ndarray((16, 1), nl.int32, buffer=nl.sbuf)
        nisa.local_gather(t[:, 0:16], t, i)  # <- rule

    def too_many_valid(a):
        t = load(a)
        i = nl.ndarray((16, 1), nl.uint16, buffer=nl.sbuf)
        nisa.local_gather(t[:, 0:17], t, i, num_valid_indices=17)  # <- rule

    def over_4096(a):
        t = load(a)
        i = nl.ndarray((16, 257), nl.uint16, buffer=nl.sbuf)
        d = nl.ndarray((16, 16 * 257), nl.float32, buffer=nl.sbuf)
        nisa.local_gather(d, t, i)  # <- rule

    def bad_dst_size(a):
        t = load(a)
        i = nl.ndarray((16, 1), nl.uint16, buffer=nl.sbuf)
        nisa.local_gather(t[:, 0:20], t, i)  # <- rule

    def bad_dst_dtype(a):
        t = load(a)
        i = nl.ndarray((16, 1), nl.uint16, buffer=nl.sbuf)
        d = nl.ndarray((16, 16), nl.bfloat16, buffer=nl.sbuf)
        nisa.local_gather(d, t, i)  # <- rule

    raises_at(
        not_16,
        s16,
        match=r"local_gather: operand 'src_buffer' has 8 partitions; "
        r"a multiple of 16",
    )
    raises_at(
        bad_k,
        s16,
        match=r"local_gather: num_elem_per_idx=3 is not supported; "
        r"allowed: 1, 2, 4, 8, 16, 32",
    )
    raises_at(bad_index_dtype, s16, match=r"operand 'index' has dtype int32; allowed: uint16")
    raises_at(
        too_many_valid,
        s16,
        match=r"local_gather: num_valid_indices=17; an integer in "
        r"\[1, 16\]",
    )
    raises_at(over_4096, s16, match=r"local_gather: 4112 indices per GpSimd core; at most 4096")
    raises_at(bad_dst_size, s16, match=r"dst has 20 elements per partition but 16 indices x 1")
    raises_at(bad_dst_dtype, s16, match=r"local_gather: operands must have the same dtype")


def test_local_gather_out_of_range_index():
    src = np.zeros((16, 8), np.float32)
    index = np.full((16, 1), 7, np.uint16)

    def kernel(s, i):
        ts, ti = load(s), load(i)
        d = nl.ndarray((16, 32), nl.float32, buffer=nl.sbuf)
        nisa.local_gather(d, ts, ti, num_elem_per_idx=2)  # <- rule

    raises_at(
        kernel,
        src,
        index,
        error=OutOfBoundsError,
        match=r"local_gather: GpSimd core 0 index 7 \(\+2 elements\) reaches past",
    )


# ---------------------------------------------------------------- nc_n_gather


def test_nc_n_gather_flattened_free_dims(rng):
    data = rng.integers(-(2**31), 2**31 - 1, (32, 4, 16), dtype=np.int64).astype(np.int32)
    idx = rng.integers(0, 64, (32, 2, 5)).astype(np.uint32)

    def kernel(d, i):
        td, ti = load(d), load(i)
        o = nl.ndarray((32, 2, 5), nl.int32, buffer=nl.sbuf)
        nisa.nc_n_gather(o, td, ti)
        return store(o)

    flat = data.reshape(32, 64)
    want = np.array([[flat[p, j] for j in idx[p].ravel()] for p in range(32)]).reshape(32, 2, 5)
    np.testing.assert_array_equal(sim(kernel, data, idx), want)


def test_nc_n_gather_rules():
    x = np.zeros((4, 16), np.float32)

    def bad_indices(a):
        t = load(a)
        i = nl.ndarray((4, 2), nl.int32, buffer=nl.sbuf)
        nisa.nc_n_gather(t[:, 0:2], t, i)  # <- rule

    def bad_dtype(a):
        t = load(a)
        i = nl.ndarray((4, 2), nl.uint32, buffer=nl.sbuf)
        o = nl.ndarray((4, 2), nl.float16, buffer=nl.sbuf)
        nisa.nc_n_gather(o, t, i)  # <- rule

    def bad_size(a):
        t = load(a)
        i = nl.ndarray((4, 2), nl.uint32, buffer=nl.sbuf)
        nisa.nc_n_gather(t[:, 0:3], t, i)  # <- rule

    raises_at(bad_indices, x, match=r"operand 'indices' has dtype int32; allowed: uint32")
    raises_at(bad_dtype, x, match=r"nc_n_gather: operands must have the same dtype")
    raises_at(
        bad_size,
        x,
        match=r"nc_n_gather: operands must have the same elements per "
        r"partition",
    )


def test_nc_n_gather_out_of_range():
    data = np.zeros((4, 16), np.float32)
    idx = np.full((4, 2), 16, np.uint32)

    def kernel(d, i):
        td, ti = load(d), load(i)
        nisa.nc_n_gather(td[:, 0:2], td, ti)  # <- rule

    err = raises_at(
        kernel,
        data,
        idx,
        error=OutOfBoundsError,
        match=r"nc_n_gather: indices\[0, 0\] = 16 is outside \[0, 16\)",
    )
    assert isinstance(err, KernelError)


# ---------------------------------------------------------------- sequence_bounds


def _bounds_ref(ids):
    n = len(ids)
    start, end = [], []
    for i, s in enumerate(ids):
        if s == 0:
            start.append(n)
            end.append(-1)
            continue
        a = i
        while a > 0 and ids[a - 1] == s:
            a -= 1
        b = i
        while b + 1 < n and ids[b + 1] == s:
            b += 1
        start.append(a)
        end.append(b + 1)
    return np.array([start, end])


@pytest.mark.parametrize("dtype", [np.int32, np.float32], ids=["int32", "float32"])
def test_sequence_bounds_doc_example(dtype):
    ids = np.array([[0, 1, 1, 2, 2, 2, 0, 3, 3]], dtype)

    def kernel(s):
        o = nl.ndarray((1, 2, 9), s.dtype, buffer=nl.sbuf)
        nisa.sequence_bounds(o, load(s))
        return store(o)

    want = np.array([[[9, 1, 1, 3, 3, 3, 9, 7, 7], [-1, 3, 3, 6, 6, 6, -1, 9, 9]]], dtype)
    np.testing.assert_array_equal(sim(kernel, ids), want)


def test_sequence_bounds_random(rng):
    ids = np.sort(rng.integers(0, 12, 200)).astype(np.float32)[None, :]
    ids[0, 150:160] = 0  # padding in the middle splits nothing else

    def kernel(s):
        o = nl.ndarray((1, 2, 200), nl.int32, buffer=nl.sbuf)
        nisa.sequence_bounds(o, load(s))
        return store(o)

    np.testing.assert_array_equal(sim(kernel, ids)[0], _bounds_ref(ids[0].tolist()))


def test_sequence_bounds_rules():
    x = np.ones((2, 8), np.float32)

    def two_rows(a):
        t = load(a)
        o = nl.ndarray((2, 2, 8), nl.float32, buffer=nl.sbuf)
        nisa.sequence_bounds(o, t)  # <- rule

    def bad_dtype(a):
        t = load(a, nl.bfloat16)
        o = nl.ndarray((1, 2, 8), nl.float32, buffer=nl.sbuf)
        nisa.sequence_bounds(o, t[0:1, :])  # <- rule

    def bad_dst(a):
        t = load(a)
        o = nl.ndarray((1, 8), nl.float32, buffer=nl.sbuf)
        nisa.sequence_bounds(o, t[0:1, :])  # <- rule

    def negative(a):
        t = load(a)
        nisa.memset(t, -1.0)
        o = nl.ndarray((1, 2, 8), nl.float32, buffer=nl.sbuf)
        nisa.sequence_bounds(o, t[0:1, :])  # <- rule

    raises_at(
        two_rows,
        x,
        match=r"sequence_bounds: operand 'segment_ids' has 2 partitions; "
        r"the partition dimension must be 1",
    )
    raises_at(
        bad_dtype,
        x,
        match=r"operand 'segment_ids' has dtype bfloat16; "
        r"allowed: float32, int32",
    )
    raises_at(bad_dst, x, match=r"sequence_bounds: dst has 8 elements for 8 segment ids")
    raises_at(negative, x, match=r"segment ids must be non-negative integers, got -1.0")


# ---------------------------------------------------------------- nonzero_with_count


def test_nonzero_with_count_core_partitions_only(rng):
    """Rows 0, 16, ..., 112 get indices+offset, padding, count; the others keep dst."""
    x = (rng.random((128, 8)) < 0.4).astype(np.int32) * rng.integers(1, 9, (128, 8)).astype(
        np.int32
    )
    x[0] = [0, 1, 1, 0, 0, 1, 0, 0]  # the documented example row
    init = np.full((128, 9), 77, np.int32)

    def kernel(s, d):
        ts, td = load(s), load(d)
        nisa.nonzero_with_count(td, ts, index_offset=16, padding_val=-1)
        return store(td)

    out = sim(kernel, x, init)
    np.testing.assert_array_equal(out[0], [17, 18, 21, -1, -1, -1, -1, -1, 3])
    for p in range(128):
        if p % 16:
            np.testing.assert_array_equal(out[p], init[p])
        else:
            nz = [j + 16 for j in range(8) if x[p, j] != 0]
            np.testing.assert_array_equal(out[p], nz + [-1] * (8 - len(nz)) + [len(nz)])


def test_nonzero_with_count_float_zero_signs_and_nan():
    x = np.zeros((16, 6), np.float32)
    x[0] = [-0.0, np.nan, 0.0, 1e-30, -2.0, 0.0]

    def kernel(s):
        o = nl.ndarray((16, 7), nl.int32, buffer=nl.sbuf)
        nisa.nonzero_with_count(o, load(s), padding_val=99)
        return store(o)

    np.testing.assert_array_equal(sim(kernel, x)[0], [1, 3, 4, 99, 99, 99, 3])


def test_nonzero_with_count_rules():
    x = np.zeros((16, 8), np.int32)

    def ok(a):
        t = load(a)
        o = nl.ndarray((16, 9), nl.int32, buffer=nl.sbuf)
        nisa.nonzero_with_count(o, t)  # <- rule

    def bad_size(a):
        t = load(a)
        o = nl.ndarray((16, 8), nl.int32, buffer=nl.sbuf)
        nisa.nonzero_with_count(o, t)  # <- rule

    def bad_dst_dtype(a):
        t = load(a)
        o = nl.ndarray((16, 9), nl.float32, buffer=nl.sbuf)
        nisa.nonzero_with_count(o, t)  # <- rule

    def bad_src_dtype(a):
        t = load(a, nl.bfloat16)
        o = nl.ndarray((16, 9), nl.int32, buffer=nl.sbuf)
        nisa.nonzero_with_count(o, t)  # <- rule

    def bad_offset(a):
        t = load(a)
        o = nl.ndarray((16, 9), nl.int32, buffer=nl.sbuf)
        nisa.nonzero_with_count(o, t, index_offset=2**31)  # <- rule

    raises_at(ok, x, chip="trn1", match=r"nonzero_with_count: not available on trn1")
    raises_at(
        bad_size,
        x,
        match=r"dst has 8 elements per partition, src 8; dst must have "
        r"exactly one more",
    )
    raises_at(bad_dst_dtype, x, match=r"operand 'dst' has dtype float32; allowed: int32")
    raises_at(bad_src_dtype, x, match=r"operand 'src' has dtype bfloat16; allowed: float32, int32")
    raises_at(bad_offset, x, match=r"index_offset=2147483648; an integer in \[-2147483648, ")


# ---------------------------------------------------------------- topk


def _snake_topk_ref(src, n, k):
    vals = np.empty((src.shape[0], k), np.float32)
    idx = np.empty((src.shape[0], k), np.uint32)
    for g in range(src.shape[0] // 16):
        snake = [float(src[16 * g + e % 16, e // 16]) for e in range(n)]
        best = sorted(range(n), key=lambda e: snake[e], reverse=True)[:k]
        best.sort(key=lambda e: snake[e])  # ascending values
        vals[16 * g : 16 * g + 16] = [snake[e] for e in best]
        idx[16 * g : 16 * g + 16] = best
    return vals, idx


@pytest.mark.parametrize(("n", "k"), [(42, 8), (8, 1), (64, 64)])
def test_topk_snake(rng, n, k):
    cols = -(-n // 16)
    x = rng.permutation(np.arange(32 * cols) - 100).reshape(32, cols)
    src = (x / 4).astype(ml_dtypes.bfloat16)  # distinct and exact in bf16

    def kernel(s):
        v = nl.ndarray((32, k), nl.bfloat16, buffer=nl.sbuf)
        i = nl.ndarray((32, k), nl.uint32, buffer=nl.sbuf)
        nisa.topk(v, i, load(s), n)
        return store(v), store(i)

    v, i = sim(kernel, src)
    want_v, want_i = _snake_topk_ref(src.astype(np.float32), n, k)
    np.testing.assert_array_equal(v.astype(np.float32), want_v)
    np.testing.assert_array_equal(i, want_i)


def test_topk_rules():
    x = np.zeros((16, 4), ml_dtypes.bfloat16)

    def small_n(a):
        t = load(a)
        v = nl.ndarray((16, 4), nl.bfloat16, buffer=nl.sbuf)
        i = nl.ndarray((16, 4), nl.uint32, buffer=nl.sbuf)
        nisa.topk(v, i, t, 7)  # <- rule

    def k_over_n(a):
        t = load(a)
        v = nl.ndarray((16, 12), nl.bfloat16, buffer=nl.sbuf)
        i = nl.ndarray((16, 12), nl.uint32, buffer=nl.sbuf)
        nisa.topk(v, i, t, 10)  # <- rule

    def short_src(a):
        t = load(a)
        v = nl.ndarray((16, 4), nl.bfloat16, buffer=nl.sbuf)
        i = nl.ndarray((16, 4), nl.uint32, buffer=nl.sbuf)
        nisa.topk(v, i, t, 65)  # <- rule

    def not_16(a):
        t = load(a)
        v = nl.ndarray((8, 4), nl.bfloat16, buffer=nl.sbuf)
        i = nl.ndarray((8, 4), nl.uint32, buffer=nl.sbuf)
        nisa.topk(v, i, t[0:8, :], 20)  # <- rule

    def bad_src_dtype(a):
        t = load(a, nl.float32)
        v = nl.ndarray((16, 4), nl.bfloat16, buffer=nl.sbuf)
        i = nl.ndarray((16, 4), nl.uint32, buffer=nl.sbuf)
        nisa.topk(v, i, t, 20)  # <- rule

    def bad_idx(a):
        t = load(a)
        v = nl.ndarray((16, 4), nl.bfloat16, buffer=nl.sbuf)
        i = nl.ndarray((16, 5), nl.uint32, buffer=nl.sbuf)
        nisa.topk(v, i, t, 20)  # <- rule

    raises_at(small_n, x, match=r"topk: n=7; an integer in \[8, 65535\]")
    raises_at(k_over_n, x, match=r"topk: K = 12 \(val_dst's elements per partition\) with n = 10")
    raises_at(
        short_src, x, match=r"topk: src has 4 columns for n = 65; at least ceil\(n / 16\) = 5"
    )
    raises_at(not_16, x, match=r"topk: operand 'src' has 8 partitions; a multiple of 16")
    raises_at(bad_src_dtype, x, match=r"operand 'src' has dtype float32; allowed: bfloat16")
    raises_at(bad_idx, x, match=r"topk: operands must have the same elements per partition")
