"""Select/statistics instructions: semantics vs numpy computed another way, one error per rule."""

from __future__ import annotations

import ml_dtypes
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from select_helpers import load, op, raises_at, record, sim, store

FP32_MIN = float(np.finfo(np.float32).min)
U32_ONES = 0xFFFFFFFF


# ---------------------------------------------------------------- affine_select


def test_affine_select_causal_mask(rng):
    """p - j >= 0 keeps the lower triangle (pattern [[-1, F]], channel_multiplier 1)."""
    x = rng.standard_normal((128, 64), dtype=np.float32)

    def kernel(a):
        t = load(a)
        o = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.affine_select(o, [[-1, 64]], 1, t, -9984.0, cmp_op=op("greater_equal"))
        return store(o)

    want = np.where(np.tril(np.ones((128, 64), bool)), x, np.float32(-9984.0))
    np.testing.assert_array_equal(sim(kernel, x), want)


def test_affine_select_multilevel_pattern_offset_and_record(rng):
    """value = offset + p*cm + 2w + x over a (P, 4, 8) tile; attrs reach the record."""
    x = rng.standard_normal((32, 4, 8), dtype=np.float32)

    def kernel(a):
        t = load(a)
        o = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.affine_select(
            dst=o,
            pattern=[[2, 4], [1, 8]],
            channel_multiplier=-3,
            on_true_tile=t,
            on_false_value=0.5,
            cmp_op=op("less"),
            offset=-5,
        )
        return store(o)

    p, w, j = np.meshgrid(np.arange(32), np.arange(4), np.arange(8), indexing="ij")
    want = np.where(-5 - 3 * p + 2 * w + j < 0, x, np.float32(0.5))
    np.testing.assert_array_equal(sim(kernel, x), want)
    instr = record(kernel, x, opcode="affine_select")
    assert instr.engine == "gpsimd"
    assert instr.attrs["pattern"] == ((2, 4), (1, 8))
    assert instr.attrs["offset"] == -5


def test_affine_select_dtypes(rng):
    """Same dtype moves bits (int16 exact); a different dst dtype goes through fp32."""
    xi = rng.integers(-30000, 30000, (16, 10)).astype(np.int16)
    xb = rng.standard_normal((16, 10)).astype(ml_dtypes.bfloat16)

    def kernel(a, b):
        ta, tb = load(a), load(b)
        oa = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        ob = nl.ndarray(b.shape, nl.float32, buffer=nl.sbuf)
        nisa.affine_select(oa, [[1, 10]], 0, ta, 7.0, cmp_op=op("not_equal"), offset=-3)
        nisa.affine_select(ob, [[1, 10]], 0, tb, -1.0, cmp_op=op("greater"), offset=-3)
        return store(oa), store(ob)

    oa, ob = sim(kernel, xi, xb)
    j = np.arange(10)[None, :]
    np.testing.assert_array_equal(oa, np.where(j != 3, xi, np.int16(7)))
    np.testing.assert_array_equal(ob, np.where(j > 3, xb.astype(np.float32), np.float32(-1)))


def test_affine_select_rules():
    x = np.zeros((16, 8), np.float32)

    def bad_pattern(a):
        t = load(a)
        nisa.affine_select(t, [[1, 4]], 0, t, 0.0)  # <- rule

    def bad_cmp(a):
        t = load(a)
        nisa.affine_select(t, [[1, 8]], 0, t, 0.0, cmp_op=op("add"))  # <- rule

    def bad_fill(a):
        t = load(a)
        nisa.affine_select(t, [[1, 8]], 0, t, t)  # <- rule

    def bad_psum(a):
        t = load(a)
        ps = nl.ndarray(a.shape, a.dtype, buffer=nl.psum)
        nisa.affine_select(ps, [[1, 8]], 0, t, 0.0)  # <- rule

    def bad_offset(a):
        t = load(a)
        nisa.affine_select(t, [[1, 8]], 0, t, 0.0, offset=2**31)  # <- rule

    raises_at(bad_offset, x, match=r"affine_select: offset=2147483648; an integer in ")
    raises_at(bad_pattern, x, match=r"affine_select: pattern covers 4 elements but dst has 8")
    raises_at(bad_cmp, x, match=r"affine_select: cmp_op='add' is not supported; allowed: equal")
    raises_at(bad_fill, x, match=r"affine_select: on_false_value=.*float32 compile-time scalar")
    raises_at(bad_psum, x, match=r"affine_select: operand 'dst' is in psum; allowed: sbuf")


# ---------------------------------------------------------------- range_select


def _range_ref(x, lo, hi, start):
    j = start + np.arange(x.shape[1])[None, :]
    return np.where((j >= lo) & (j < hi), x, np.float32(FP32_MIN))


def test_range_select_values_and_reduce(rng):
    """lo <= range_start + j < hi per partition; reduce_res = row max (reset_reduce default)."""
    x = rng.standard_normal((128, 96), dtype=np.float32)
    lo = rng.integers(0, 60, (128, 1)).astype(np.float32)
    hi = lo + rng.integers(0, 50, (128, 1)).astype(np.float32)
    hi[0] = lo[0]  # one fully masked row

    def kernel(a, b0, b1):
        t, t0, t1 = load(a), load(b0), load(b1)
        o = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        r = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
        nisa.range_select(
            o, t, op("greater_equal"), op("less"), t0, t1, reduce_res=r, range_start=20
        )
        return store(o), store(r)

    out, red = sim(kernel, x, lo, hi)
    want = _range_ref(x, lo, hi, 20)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(red, want.max(axis=1, keepdims=True))
    assert red[0, 0] == np.float32(FP32_MIN)


def test_range_select_accumulates_across_instructions(rng):
    """reset_reduce, reduce, reduce(+reduce_res): the max over all three (AWS's chaining)."""
    x = rng.standard_normal((64, 128), dtype=np.float32)
    lo = np.zeros((64, 1), np.float32)
    hi = np.full((64, 1), 300, np.float32)

    def kernel(a, b0, b1):
        t, t0, t1 = load(a), load(b0), load(b1)
        o = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        r = nl.ndarray((64, 1), nl.float32, buffer=nl.sbuf)
        for i in range(3):
            nisa.range_select(
                o,
                t,
                op("greater_equal"),
                op("less"),
                t0,
                t1,
                reduce_cmd=nisa.reduce_cmd.reset_reduce if i == 0 else nisa.reduce_cmd.reduce,
                reduce_res=r if i == 2 else None,
                range_start=i * 128,
            )
        return store(r)

    want = np.max([_range_ref(x, lo, hi, i * 128).max(axis=1) for i in range(3)], axis=0)
    np.testing.assert_array_equal(sim(kernel, x, lo, hi)[:, 0], want)


# TODO(select helper): add float8_e5m2 once memory.strided_array handles it (numpy 2.4 cannot
# as_strided an ml_dtypes float8_e5m2 array: "data type '<f1' not understood").
@pytest.mark.parametrize(
    "dtype", [ml_dtypes.bfloat16, np.float16, ml_dtypes.float8_e4m3], ids=lambda d: np.dtype(d).name
)
def test_range_select_fp32_min_becomes_minus_inf(dtype):
    """FP32_MIN written to bf16/fp16/fp8 is -inf; an fp32 reduce_res keeps FP32_MIN."""
    x = np.ones((32, 16), np.float32).astype(dtype)
    lo = np.full((32, 1), 100, np.float32)

    def kernel(a, b0):
        t, t0 = load(a), load(b0)
        o = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        r = nl.ndarray((32, 1), nl.float32, buffer=nl.sbuf)
        nisa.range_select(o, t, op("greater_equal"), op("greater_equal"), t0, t0, reduce_res=r)
        return store(o), store(r)

    out, red = sim(kernel, x, lo)
    assert np.all(np.isneginf(out.astype(np.float32)))
    assert np.all(red == np.float32(FP32_MIN))


def test_range_select_rules():
    x = np.zeros((32, 8), np.float32)
    b = np.zeros((32, 1), np.float32)
    b2 = np.zeros((32, 2), np.float32)
    xi = np.zeros((32, 8), np.int32)

    def bad_cmp(a, b0):
        t, t0 = load(a), load(b0)
        nisa.range_select(t, t, op("not_equal"), op("less"), t0, t0)  # <- rule

    def bad_fill(a, b0):
        t, t0 = load(a), load(b0)
        nisa.range_select(t, t, op("less"), op("less"), t0, t0, on_false_value=0.0)  # <- rule

    def bad_reduce_op(a, b0):
        t, t0 = load(a), load(b0)
        nisa.range_select(t, t, op("less"), op("less"), t0, t0, reduce_op=op("add"))  # <- rule

    def bad_cmd(a, b0):
        t, t0 = load(a), load(b0)
        cmd = nisa.reduce_cmd.load_reduce
        nisa.range_select(t, t, op("less"), op("less"), t0, t0, reduce_cmd=cmd)  # <- rule

    def bad_bound_dtype(a, b0):
        t, t0 = load(a), load(b0, nl.bfloat16)
        nisa.range_select(t, t, op("less"), op("less"), t0, t0)  # <- rule

    def bad_bound_shape(a, b0):
        t, t0 = load(a), load(b0)
        nisa.range_select(t, t, op("less"), op("less"), t0, t0)  # <- rule

    def bad_on_true(a, b0):
        t, t0 = load(a), load(b0)
        nisa.range_select(t, t, op("less"), op("less"), t0, t0)  # <- rule

    def bad_reduce_res(a, b0):
        t, t0 = load(a), load(b0)
        r = nl.ndarray((32, 1), nl.int32, buffer=nl.sbuf)
        nisa.range_select(t, t, op("less"), op("less"), t0, t0, reduce_res=r)  # <- rule

    def ok(a, b0):
        t, t0 = load(a), load(b0)
        nisa.range_select(t, t, op("less"), op("less"), t0, t0)  # <- rule

    raises_at(bad_cmp, x, b, match=r"range_select: comp_op0='not_equal' is not supported")
    raises_at(
        bad_fill,
        x,
        b,
        match=r"range_select: on_false_value=0.0; the hardware only "
        r"supports FP32_MIN",
    )
    raises_at(
        bad_reduce_op,
        x,
        b,
        match=r"range_select: reduce_op='add' is not supported; "
        r"allowed: maximum",
    )
    raises_at(bad_cmd, x, b, match=r"range_select: reduce_cmd=load_reduce is not supported")
    raises_at(bad_bound_dtype, x, b, match=r"operand 'bound0' has dtype bfloat16; allowed: float32")
    raises_at(bad_bound_shape, x, b2, match=r"operand 'bound0' must be a scalar or a \(P, 1\)")
    raises_at(bad_on_true, xi, b, match=r"range_select: operand 'on_true_tile' has dtype int32")
    raises_at(
        bad_reduce_res,
        x,
        b,
        match=r"operand 'reduce_res' has dtype int32; reduce_res "
        r"must be a float dtype",
    )
    raises_at(
        ok,
        x,
        b,
        chip="trn1",
        match=r"range_select: not available on trn1 "
        r"\(NeuronCore-v2\); needs NeuronCore-v3",
    )
    sim(ok, x, b, chip="trn2")  # NC-v3 has it


# ---------------------------------------------------------------- select_reduce


def test_select_reduce_values_reverse_and_vector_on_false(rng):
    x = rng.standard_normal((64, 40), dtype=np.float32)
    pred = rng.integers(0, 3, (64, 40)).astype(np.uint8)
    fill = rng.standard_normal((64, 1), dtype=np.float32)

    def kernel(a, p, f):
        t, tp, tf = load(a), load(p), load(f)
        o1 = nl.ndarray(a.shape, nl.bfloat16, buffer=nl.sbuf)
        o2 = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        r = nl.ndarray((64, 1), nl.float32, buffer=nl.sbuf)
        nisa.select_reduce(o1, tp, t, -2.5, reduce_res=r)  # idle + reduce_res: this row max
        nisa.select_reduce(o2, tp, t, tf, reverse_pred=True)
        return store(o1), store(r), store(o2)

    o1, r, o2 = sim(kernel, x, pred, fill)
    want1 = np.where(pred != 0, x, np.float32(-2.5))
    np.testing.assert_array_equal(o1, want1.astype(ml_dtypes.bfloat16))
    np.testing.assert_array_equal(r[:, 0], want1.max(axis=1))
    np.testing.assert_array_equal(o2, np.where(pred == 0, x, fill))


def test_select_reduce_accumulator_chain(rng):
    """reset_reduce then reduce: the accumulator holds the max over both instructions."""
    x = rng.standard_normal((32, 20), dtype=np.float32)
    y = rng.standard_normal((32, 20), dtype=np.float32)
    pred = rng.integers(0, 2, (32, 20)).astype(np.int16)

    def kernel(a, b, p):
        ta, tb, tp = load(a), load(b), load(p)
        o = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        r = nl.ndarray((32, 1), nl.float32, buffer=nl.sbuf)
        nisa.select_reduce(o, tp, ta, -100.0, reduce_cmd=nisa.reduce_cmd.reset_reduce)
        nisa.select_reduce(o, tp, tb, -100.0, reduce_res=r, reduce_cmd=nisa.reduce_cmd.reduce)
        return store(r)

    m = pred != 0
    want = np.maximum(np.where(m, x, -100).max(axis=1), np.where(m, y, -100).max(axis=1))
    np.testing.assert_array_equal(sim(kernel, x, y, pred)[:, 0], want.astype(np.float32))


def test_select_reduce_rules():
    x = np.zeros((32, 8), np.float32)
    p8 = np.zeros((32, 8), np.uint8)

    def bad_pred_dtype(a, p):
        t = load(a)
        nisa.select_reduce(t, t, t, 0.0)  # <- rule

    def bad_on_true(a, p):
        tp = load(p)
        ti = nl.ndarray(a.shape, nl.int32, buffer=nl.sbuf)
        nisa.select_reduce(ti, tp, ti, 0.0)  # <- rule

    def both_psum(a, p):
        pt = nl.ndarray(a.shape, a.dtype, buffer=nl.psum)
        pp = nl.ndarray(a.shape, nl.uint8, buffer=nl.psum)
        nisa.select_reduce(pt, pp, pt, 0.0)  # <- rule

    def bad_reduce_op(a, p):
        t, tp = load(a), load(p)
        nisa.select_reduce(t, tp, t, 0.0, reduce_op=op("minimum"))  # <- rule

    def bad_on_false(a, p):
        t, tp = load(a), load(p)
        f = nl.ndarray((32, 2), nl.float32, buffer=nl.sbuf)
        nisa.select_reduce(t, tp, t, f)  # <- rule

    def bad_cmd(a, p):
        t, tp = load(a), load(p)
        nisa.select_reduce(t, tp, t, 0.0, reduce_cmd="accumulate")  # <- rule

    raises_at(bad_cmd, x, p8, match=r"select_reduce: reduce_cmd='accumulate' is not supported")
    raises_at(
        bad_pred_dtype,
        x,
        p8,
        match=r"operand 'predicate' has dtype float32; "
        r"allowed: int8, uint8, int16, uint16",
    )
    raises_at(bad_on_true, x, p8, match=r"operand 'on_true' has dtype int32; not allowed")
    raises_at(both_psum, x, p8, match=r"on_true and predicate are both in psum")
    raises_at(bad_reduce_op, x, p8, match=r"reduce_op='minimum' is not supported")
    raises_at(bad_on_false, x, p8, match=r"operand 'on_false' must be a scalar or a \(P, 1\)")


# ---------------------------------------------------------------- bn_stats / bn_aggr


def test_bn_stats_layout_even_then_odd(rng):
    """(count, mean, var*count) of x[:, 0::2], then of x[:, 1::2], flat free order."""
    x = rng.standard_normal((16, 5, 7), dtype=np.float32)  # 35 elements: 18 even, 17 odd

    def kernel(a):
        s = nl.ndarray((16, 6), nl.float32, buffer=nl.sbuf)
        nisa.bn_stats(s, load(a))
        return store(s)

    s = sim(kernel, x).astype(np.float64)
    flat = x.reshape(16, -1).astype(np.float64)
    for k, part in enumerate((flat[:, 0::2], flat[:, 1::2])):
        n = part.shape[1]
        np.testing.assert_array_equal(s[:, 3 * k], n)
        np.testing.assert_allclose(s[:, 3 * k + 1], part.mean(axis=1), rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(s[:, 3 * k + 2], part.var(axis=1) * n, rtol=1e-6)


@pytest.mark.parametrize("width", [300, 1000, 1], ids=["one_tile", "two_tiles", "one_elem"])
def test_bn_stats_then_bn_aggr_is_mean_and_var(rng, width):
    """bn_stats over <=512-element tiles merged by one bn_aggr = np.mean / np.var of the row."""
    x = (rng.standard_normal((128, width)) * 3 + 5).astype(np.float32)
    tiles = [(i, min(512, width - i)) for i in range(0, width, 512)]

    def kernel(a):
        t = load(a)
        stats = nl.ndarray((128, 6 * len(tiles)), nl.float32, buffer=nl.sbuf)
        for k, (i, n) in enumerate(tiles):
            nisa.bn_stats(stats[:, 6 * k : 6 * k + 6], t[:, i : i + n])
        mv = nl.ndarray((128, 2), nl.float32, buffer=nl.sbuf)
        nisa.bn_aggr(mv, stats)
        return store(mv)

    mv = sim(kernel, x)
    ref = x.astype(np.float64)
    np.testing.assert_allclose(mv[:, 0], ref.mean(axis=1), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(mv[:, 1], ref.var(axis=1), rtol=1e-5, atol=1e-6)


def test_bn_rules():
    x = np.zeros((8, 513), np.float32)

    def too_wide(a):
        t = load(a)
        s = nl.ndarray((8, 6), nl.float32, buffer=nl.sbuf)
        nisa.bn_stats(s, t)  # <- rule

    def stats_dst(a):
        t = load(a)
        s = nl.ndarray((8, 5), nl.float32, buffer=nl.sbuf)
        nisa.bn_stats(s, t[:, 0:8])  # <- rule

    def aggr_input(a):
        t = load(a)
        s = nl.ndarray((8, 2), nl.float32, buffer=nl.sbuf)
        nisa.bn_aggr(s, t[:, 0:7])  # <- rule

    def aggr_dst(a):
        t = load(a)
        s = nl.ndarray((8, 3), nl.float32, buffer=nl.sbuf)
        nisa.bn_aggr(s, t[:, 0:6])  # <- rule

    raises_at(
        too_wide,
        x,
        match=r"bn_stats: operand 'data' has free size 513; at most 512 "
        r"\(bn_stats_fmax\)",
    )
    raises_at(
        stats_dst,
        x,
        match=r"bn_stats: operand 'dst' has 5 elements per partition; "
        r"it must have 6",
    )
    raises_at(
        aggr_input,
        x,
        match=r"bn_aggr: operand 'data' has 7 elements per partition; "
        r"a positive multiple of 3",
    )
    raises_at(aggr_dst, x, match=r"bn_aggr: operand 'dst' has 3 elements per partition")


# ---------------------------------------------------------------- nc_stream_shuffle


def test_nc_stream_shuffle_quadrants_and_keep(rng):
    """dst[q*32+i] = src[q*32+mask[i]] in every quadrant; 255 leaves dst[q*32+i] as it was."""
    x = rng.standard_normal((128, 6), dtype=np.float32)
    d0 = rng.standard_normal((128, 6), dtype=np.float32)
    mask = [(i * 7 + 3) % 32 for i in range(32)]
    mask[5] = mask[30] = 255

    def kernel(a, d):
        t, o = load(a), load(d)
        nisa.nc_stream_shuffle(o, t, mask)
        return store(o)

    want = d0.copy()
    for q in range(4):
        for i, m in enumerate(mask):
            if m != 255:
                want[q * 32 + i] = x[q * 32 + m]
    np.testing.assert_array_equal(sim(kernel, x, d0), want)


def test_nc_stream_shuffle_in_place_and_cross_quadrant(rng):
    x = rng.standard_normal((32, 4), dtype=np.float32)
    rot = [(i - 1) % 32 for i in range(32)]

    def kernel(a):
        t = load(a)
        nisa.nc_stream_shuffle(dst=t, src=t, shuffle_mask=rot)  # in place: rotate by one
        big = nl.ndarray((128, 4), nl.float32, buffer=nl.sbuf)
        nisa.memset(big, 0.0)
        nisa.nc_stream_shuffle(big[64:96, :], t, list(range(32)))  # quadrant 0 -> quadrant 2
        return store(t), store(big)

    rolled, big = sim(kernel, x)
    np.testing.assert_array_equal(rolled, np.roll(x, 1, axis=0))
    np.testing.assert_array_equal(big[64:96], np.roll(x, 1, axis=0))
    assert not big[:64].any()
    assert not big[96:].any()


def test_nc_stream_shuffle_rules():
    x = np.zeros((128, 4), np.float32)
    ident = list(range(32))

    def short_mask(a):
        t = load(a)
        nisa.nc_stream_shuffle(t, t, ident[:31])  # <- rule

    def bad_value(a):
        t = load(a)
        nisa.nc_stream_shuffle(t, t, [40, *ident[1:]])  # <- rule

    def bad_start(a):
        t = load(a)
        nisa.nc_stream_shuffle(t[0:64, :], t[32:64, :], ident)  # <- rule

    def missing_src(a):
        t = load(a)
        mask = [20] + ident[1:16] + [255] * 16
        nisa.nc_stream_shuffle(t[0:32, :], t[0:16, :], mask)  # <- rule

    def bad_dtype(a):
        t = load(a)
        o = nl.ndarray((128, 4), nl.bfloat16, buffer=nl.sbuf)
        nisa.nc_stream_shuffle(o, t, ident)  # <- rule

    raises_at(short_mask, x, match=r"nc_stream_shuffle: shuffle_mask=.*a list of 32 integers")
    raises_at(bad_value, x, match=r"each in \[0, 31\] or 255")
    raises_at(
        bad_start,
        x,
        match=r"operand 'src' starts at partition 32 with 64 active "
        r"partitions.*must start at partition 0 or 64",
    )
    raises_at(
        missing_src,
        x,
        match=r"shuffle_mask\[0\]=20 makes dst partition 0 read src "
        r"partition 20, but src has 16 partitions",
    )
    raises_at(bad_dtype, x, match=r"operands must have the same dtype")


# ------------------------------------------------------- max8 / find_index8 / match_replace8


def test_max8_descending(rng):
    x = rng.integers(-20, 20, (64, 3, 33)).astype(np.float32)  # many duplicates, 3-D

    def kernel(a):
        o = nl.ndarray((64, 8), nl.float32, buffer=nl.sbuf)
        nisa.max8(o, load(a))
        return store(o)

    want = np.array([sorted(row, reverse=True)[:8] for row in x.reshape(64, -1)], np.float32)
    np.testing.assert_array_equal(sim(kernel, x), want)


def test_max8_bf16_in_fp32_out(rng):
    x = rng.standard_normal((8, 500)).astype(ml_dtypes.bfloat16)

    def kernel(a):
        o = nl.ndarray((8, 8), nl.float32, buffer=nl.sbuf)
        nisa.max8(o, load(a))
        return store(o)

    np.testing.assert_array_equal(sim(kernel, x), -np.sort(-x.astype(np.float32), axis=1)[:, :8])


def test_find_index8_first_occurrence_duplicates_and_missing(rng):
    """First occurrence; duplicated vals take successive occurrences; missing -> all ones."""
    data = np.tile(np.arange(20, dtype=np.float32), (4, 2))  # each value at i and i + 20
    vals = np.array([[3, 3, 3, 7, 19, 0, 50, 7]] * 4, np.float32)

    def kernel(d, v):
        o32 = nl.ndarray((4, 8), nl.uint32, buffer=nl.sbuf)
        o16 = nl.ndarray((4, 8), nl.uint16, buffer=nl.sbuf)
        td, tv = load(d), load(v)
        nisa.nc_find_index8(o32, td, tv)
        nisa.nc_find_index8(o16, td, tv)
        return store(o32), store(o16)

    o32, o16 = sim(kernel, data, vals)
    want = [3, 23, U32_ONES, 7, 19, 0, U32_ONES, 27]
    np.testing.assert_array_equal(o32, np.array([want] * 4, np.uint32))
    np.testing.assert_array_equal(o16, np.array([[w & 0xFFFF for w in want]] * 4, np.uint16))


def _match_replace_ref(data, vals, imm):
    """Pair each value's occurrences (ascending) with its slots (descending)."""
    out = data.copy()
    idx = np.full(vals.shape, U32_ONES, np.uint64)
    for p in range(data.shape[0]):
        for v in set(vals[p].tolist()):
            slots = sorted(np.flatnonzero(vals[p] == v), reverse=True)
            places = np.flatnonzero(data[p] == v)
            for s, k in zip(slots, places, strict=False):
                out[p, k] = imm
                idx[p, s] = k
    return out, idx


def test_match_replace8_duplicates_reverse_order(rng):
    data = rng.integers(0, 6, (16, 40)).astype(np.float32)
    vals = rng.integers(0, 7, (16, 8)).astype(np.float32)  # 6 is never in data

    def kernel(d, v):
        td, tv = load(d), load(v)
        o = nl.ndarray(d.shape, d.dtype, buffer=nl.sbuf)
        i = nl.ndarray((16, 8), nl.uint32, buffer=nl.sbuf)
        nisa.nc_match_replace8(o, td, tv, -1.0, dst_idx=i)
        nisa.nc_match_replace8(td, td, tv, -1.0)  # in place, no indices
        return store(o), store(i), store(td)

    out, idx, inplace = sim(kernel, data, vals)
    want, want_idx = _match_replace_ref(data, vals, -1.0)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(idx, want_idx.astype(np.uint32))
    np.testing.assert_array_equal(inplace, want)


def test_top16_by_max8_and_match_replace8(rng):
    """Two rounds of max8 + nc_find_index8 + nc_match_replace8 give the 16 largest with indices."""
    x = rng.permutation(np.arange(128 * 300, dtype=np.float32)).reshape(128, 300)

    def kernel(a):
        t = load(a)
        vals = nl.ndarray((128, 16), nl.float32, buffer=nl.sbuf)
        idx = nl.ndarray((128, 16), nl.uint32, buffer=nl.sbuf)
        for r in range(2):
            nisa.max8(vals[:, 8 * r : 8 * r + 8], t)
            nisa.nc_find_index8(idx[:, 8 * r : 8 * r + 8], t, vals[:, 8 * r : 8 * r + 8])
            nisa.nc_match_replace8(t, t, vals[:, 8 * r : 8 * r + 8], -1e30)
        return store(vals), store(idx)

    vals, idx = sim(kernel, x)
    order = np.argsort(-x, axis=1)[:, :16]
    np.testing.assert_array_equal(idx, order.astype(np.uint32))
    np.testing.assert_array_equal(vals, np.take_along_axis(x, order, axis=1))


def test_max8_find_match_rules():
    x = np.zeros((2, 16385), np.float32)

    def max8_small(a):
        t = load(a)
        o = nl.ndarray((2, 8), nl.float32, buffer=nl.sbuf)
        nisa.max8(o, t[:, 0:7])  # <- rule

    def max8_large(a):
        t = load(a)
        o = nl.ndarray((2, 8), nl.float32, buffer=nl.sbuf)
        nisa.max8(o, t)  # <- rule

    def max8_dst(a):
        t = load(a)
        o = nl.ndarray((2, 9), nl.float32, buffer=nl.sbuf)
        nisa.max8(o, t[:, 0:64])  # <- rule

    def max8_rank(a):
        t = load(a)
        o = nl.ndarray((2, 8), nl.float32, buffer=nl.sbuf)
        nisa.max8(o, t[:, 0:64].reshape((2, 4, 4, 4)))  # <- rule

    def find_dtype(a):
        t = load(a)
        o = nl.ndarray((2, 8), nl.float32, buffer=nl.sbuf)
        nisa.nc_find_index8(o, t[:, 0:64], t[:, 0:8])  # <- rule

    def find_vals(a):
        t = load(a)
        o = nl.ndarray((2, 8), nl.uint32, buffer=nl.sbuf)
        nisa.nc_find_index8(o, t[:, 0:64], t[:, 0:7])  # <- rule

    def find_data(a):
        t = load(a)
        o = nl.ndarray((2, 8), nl.uint32, buffer=nl.sbuf)
        nisa.nc_find_index8(o, t[:, 0:7], t[:, 0:8])  # <- rule

    def find_rank(a):
        t = load(a)
        o = nl.ndarray((2, 8), nl.uint32, buffer=nl.sbuf)
        nisa.nc_find_index8(o, t[:, 0:64].reshape((2, 2, 2, 2, 2, 4)), t[:, 0:8])  # <- rule

    def match_vals(a):
        t = load(a)
        nisa.nc_match_replace8(t[:, 0:64], t[:, 0:64], t[:, 64:73], 0.0)  # <- rule

    def match_data(a):
        t = load(a)
        o = nl.ndarray((2, 16385), nl.float32, buffer=nl.sbuf)
        nisa.nc_match_replace8(o, t, t[:, 0:8], 0.0)  # <- rule

    def match_idx_dtype(a):
        t = load(a)
        i = nl.ndarray((2, 8), nl.int32, buffer=nl.sbuf)
        nisa.nc_match_replace8(t[:, 0:64], t[:, 0:64], t[:, 0:8], 0.0, dst_idx=i)  # <- rule

    def match_imm(a):
        t = load(a)
        nisa.nc_match_replace8(t[:, 0:64], t[:, 0:64], t[:, 0:8], "inf")  # <- rule

    def match_dst(a):
        t = load(a)
        nisa.nc_match_replace8(t[:, 0:63], t[:, 0:64], t[:, 64:72], 0.0)  # <- rule

    raises_at(
        max8_small,
        x,
        match=r"max8: operand 'src' has 7 elements per partition; "
        r"between 8 and 16384 allowed",
    )
    raises_at(max8_large, x, match=r"max8: operand 'src' has 16385 elements per partition")
    raises_at(
        max8_dst, x, match=r"max8: operand 'dst' has 9 elements per partition; it must have 8"
    )
    raises_at(max8_rank, x, match=r"max8: operand 'src' has 4 dimensions; at most 3")
    raises_at(
        find_dtype,
        x,
        match=r"nc_find_index8: operand 'dst' has dtype float32; "
        r"allowed: uint32, uint16",
    )
    raises_at(find_vals, x, match=r"nc_find_index8: operand 'vals' has 7 elements per partition")
    raises_at(find_data, x, match=r"nc_find_index8: operand 'data' has 7 elements per partition")
    raises_at(find_rank, x, match=r"nc_find_index8: operand 'data' has 6 dimensions; at most 5")
    raises_at(match_vals, x, match=r"nc_match_replace8: operand 'vals' has 9 elements")
    raises_at(
        match_data,
        x,
        match=r"nc_match_replace8: operand 'data' has 16385 elements per "
        r"partition; between 1 and 16384 allowed",
    )
    raises_at(match_idx_dtype, x, match=r"operand 'dst_idx' has dtype int32; allowed: uint32")
    raises_at(match_imm, x, match=r"nc_match_replace8: imm='inf'; imm must be a float32")
    raises_at(
        match_dst,
        x,
        match=r"nc_match_replace8: operands must have the same elements "
        r"per partition",
    )
