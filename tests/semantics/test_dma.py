"""DMA instructions vs numpy: dma_copy (casts, views, gather/scatter, dynamic offsets, OOB),
dma_transpose, dma_compute, the Beta-1 dst_rmw_op, and one ConstraintError per rule."""

from __future__ import annotations

import linecache

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from source_paths import assert_no_internal_path

from trnsim.errors import ConstraintError, OutOfBoundsError
from trnsim.nki._isa_base import _issue
from trnsim.nki.runner import run_kernel


def run(kernel, *arrays, chip="trn3"):
    return nki.simulate(kernel, chip=chip)(*arrays)


def statement_at(filename: str, lineno: int) -> str:
    """The source of the statement starting at `lineno` (up to balanced parentheses)."""
    text, depth, n = "", 0, lineno
    while True:
        line = linecache.getline(filename, n)
        text += line
        depth += line.count("(") - line.count(")")
        if depth <= 0 or not line:
            return text
        n += 1


def assert_at_user_line(exc: pytest.ExceptionInfo) -> None:
    """The error points at the kernel line marked `# ERR` and names no trnsim file."""
    loc = exc.value.loc
    assert loc is not None
    assert loc.filename == __file__
    assert "# ERR" in statement_at(loc.filename, loc.lineno)
    assert_no_internal_path(str(exc.value))


def _roundtrip_cast(a, mid_dtype, out_dtype):
    """HBM a -> SBUF (mid_dtype) -> HBM (out_dtype), two casting DMAs."""

    def kernel(x):
        t = nl.ndarray(x.shape, mid_dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        out = nl.ndarray(x.shape, out_dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    return run(kernel, a)


# ---------------------------------------------------------------- dma_copy values
def test_copy_roundtrip_is_bit_exact(rng):
    a = rng.standard_normal((128, 64)).astype(np.float32)
    np.testing.assert_array_equal(_roundtrip_cast(a, nl.float32, nl.float32), a)


@pytest.mark.parametrize(
    ("mid", "mid_np"),
    [
        pytest.param(nl.bfloat16, ml_dtypes.bfloat16, id="bf16"),
        pytest.param(nl.float8_e4m3, ml_dtypes.float8_e4m3, id="fp8_e4m3"),
        pytest.param(nl.float8_e5m2, ml_dtypes.float8_e5m2, id="fp8_e5m2"),
        pytest.param(nl.float16, np.float16, id="fp16"),
    ],
)
def test_copy_casts_float_via_fp32_with_rne(rng, mid, mid_np):
    a = (rng.standard_normal((16, 32)) * 4).astype(np.float32)
    got = _roundtrip_cast(a, mid, nl.float32)
    np.testing.assert_array_equal(got, a.astype(mid_np).astype(np.float32))


def test_copy_float_to_int_rounds_to_nearest_even_and_saturates():
    a = np.array([[0.5, 1.5, 2.5, -0.5, -1.5, 300.0, -300.0, 127.4]], dtype=np.float32)
    got = _roundtrip_cast(a, nl.int8, nl.int32)
    np.testing.assert_array_equal(got, [[0, 2, 2, 0, -2, 127, -128, 127]])


def test_copy_int_to_float_goes_through_fp32():
    a = np.array([[2**24 + 1, -(2**24) - 3, 7]], dtype=np.int32)
    got = _roundtrip_cast(a, nl.float32, nl.int32)
    np.testing.assert_array_equal(got, a.astype(np.float32).astype(np.int64))


def test_copy_bf16_to_int16_and_back(rng):
    a = (rng.standard_normal((8, 16)) * 1000).astype(ml_dtypes.bfloat16)
    got = _roundtrip_cast(a, nl.int16, nl.bfloat16)
    ref = np.clip(np.rint(a.astype(np.float64)), -32768, 32767).astype(np.float32)
    np.testing.assert_array_equal(
        got.astype(np.float32), ref.astype(ml_dtypes.bfloat16).astype(np.float32)
    )


def test_copy_shapes_may_differ_if_counts_match(rng):
    a = rng.standard_normal((4, 8)).astype(np.float32)

    def kernel(x):
        t = nl.ndarray((2, 16), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        out = nl.ndarray((32,), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    np.testing.assert_array_equal(run(kernel, a), a.reshape(-1))


def test_copy_strided_hbm_views(rng):
    a = rng.standard_normal((16, 24)).astype(np.float32)

    def kernel(x):
        t = nl.ndarray((8, 8), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[::2, 1::3])
        out = nl.ndarray((8, 16), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out[:, ::2], src=t)
        nisa.dma_copy(dst=out[:, 1::2], src=t)
        return out

    got = run(kernel, a)
    np.testing.assert_array_equal(got[:, ::2], a[::2, 1::3])
    np.testing.assert_array_equal(got[:, 1::2], a[::2, 1::3])


def test_copy_hbm_to_hbm_and_sbuf_to_sbuf(rng):
    a = rng.standard_normal((8, 8)).astype(np.float32)

    def kernel(x):
        mid = nl.ndarray((8, 8), nl.float32, buffer=nl.private_hbm)
        nisa.dma_copy(dst=mid, src=x)
        s1 = nl.ndarray((8, 8), nl.float32, buffer=nl.sbuf)
        s2 = nl.ndarray((8, 8), nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(dst=s1, src=mid)
        nisa.dma_copy(dst=s2, src=s1)
        out = nl.ndarray((8, 8), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=s2)
        return out

    np.testing.assert_array_equal(run(kernel, a), a.astype(ml_dtypes.bfloat16).astype(np.float32))


def test_copy_from_psum_is_rejected():
    def kernel(x):
        p = nl.ndarray((4, 4), nl.float32, buffer=nl.psum)
        nisa.memset(dst=p, value=0.0)
        nisa.dma_copy(dst=x, src=p)  # ERR
        return x

    with pytest.raises(ConstraintError, match="psum") as exc:
        run(kernel, np.zeros((4, 4), np.float32))
    assert_at_user_line(exc)


# ---------------------------------------------------------------- gather / scatter
def _table(rows=32, cols=16):
    return np.arange(rows * cols, dtype=np.float32).reshape(rows, cols)


def test_vector_offset_gather_rows():
    table = _table()
    idx = np.array([[5], [0], [31], [5], [17], [2], [9], [30]], dtype=np.int32)

    def kernel(t, ix):
        i_sb = nl.ndarray((8, 1), nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=i_sb, src=ix)
        rows = nl.ndarray((8, 16), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(
            dst=rows, src=t.ap([[16, 8], [1, 16]], vector_offset=i_sb), dge_mode=nisa.dge_mode.swdge
        )
        out = nl.ndarray((8, 16), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=rows)
        return out

    np.testing.assert_array_equal(run(kernel, table, idx), table[idx[:, 0]])


def test_vector_offset_scatter_rows():
    src = _table(4, 16)
    idx = np.array([[3], [7], [0], [6]], dtype=np.int32)

    def kernel(s, ix):
        i_sb = nl.ndarray((4, 1), nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=i_sb, src=ix)
        s_sb = nl.ndarray((4, 16), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s_sb, src=s)
        out = nl.ndarray((8, 16), nl.float32, buffer=nl.shared_hbm)
        zeros = nl.ndarray((8, 16), nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=zeros, value=0.0)
        nisa.dma_copy(dst=out, src=zeros)
        nisa.dma_copy(dst=out.ap([[16, 4], [1, 16]], vector_offset=i_sb), src=s_sb)
        return out

    want = np.zeros((8, 16), np.float32)
    want[idx[:, 0]] = src
    np.testing.assert_array_equal(run(kernel, src, idx), want)


def _gather_kernel(oob):
    def kernel(t, ix):
        i_sb = nl.ndarray((4, 1), nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=i_sb, src=ix)
        rows = nl.ndarray((4, 16), nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=rows, value=-1.0)
        nisa.dma_copy(
            dst=rows,
            src=t.ap([[16, 4], [1, 16]], vector_offset=i_sb),  # ERR
            oob_mode=oob,
        )
        out = nl.ndarray((4, 16), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=rows)
        return out

    return kernel


def test_vector_offset_out_of_bounds_is_an_error_at_the_users_line():
    idx = np.array([[1], [32], [2], [3]], dtype=np.int32)
    with pytest.raises(OutOfBoundsError, match=r"32 is outside \[0, 32\)") as exc:
        run(_gather_kernel(nisa.oob_mode.error), _table(), idx)
    assert_at_user_line(exc)


def test_vector_offset_out_of_bounds_rows_are_skipped():
    table = _table()
    idx = np.array([[1], [32], [-1], [3]], dtype=np.int32)
    got = run(_gather_kernel(nisa.oob_mode.skip), table, idx)
    np.testing.assert_array_equal(got[[0, 3]], table[[1, 3]])
    np.testing.assert_array_equal(got[[1, 2]], np.full((2, 16), -1.0, np.float32))


def test_scatter_out_of_bounds_rows_are_skipped():
    src = _table(3, 4)
    idx = np.array([[0], [9], [2]], dtype=np.int32)

    def kernel(s, ix):
        i_sb = nl.ndarray((3, 1), nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=i_sb, src=ix)
        s_sb = nl.ndarray((3, 4), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s_sb, src=s)
        out = nl.ndarray((4, 4), nl.float32, buffer=nl.shared_hbm)
        z = nl.ndarray((4, 4), nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=z, value=0.0)
        nisa.dma_copy(dst=out, src=z)
        nisa.dma_copy(
            dst=out.ap([[4, 3], [1, 4]], vector_offset=i_sb), src=s_sb, oob_mode=nisa.oob_mode.skip
        )
        return out

    got = run(kernel, src, idx)
    want = np.zeros((4, 4), np.float32)
    want[[0, 2]] = src[[0, 2]]
    np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------- scalar offsets
def test_scalar_offset_from_a_register():
    table = _table()

    def kernel(t):
        r = nisa.register_alloc(3)
        rows = nl.ndarray((4, 16), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=rows, src=t.ap([[16, 4], [1, 16]], scalar_offset=r, indirect_dim=0))
        out = nl.ndarray((4, 16), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=rows)
        return out

    np.testing.assert_array_equal(run(kernel, table), table[3:7])


def test_scalar_offset_from_a_1x1_tile_on_a_later_dim():
    base = np.arange(4 * 6 * 5, dtype=np.float32).reshape(4, 6, 5)
    off = np.array([[2]], dtype=np.int32)

    def kernel(t, o):
        o_sb = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=o_sb, src=o)
        # start element = 0 + 2 * prod(base_shape[2:]) = 10: row 2 of the middle dim
        v = t.ap([[30, 4], [1, 5]], scalar_offset=o_sb, indirect_dim=1)
        rows = nl.ndarray((4, 5), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=rows, src=v)
        out = nl.ndarray((4, 5), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=rows)
        return out

    np.testing.assert_array_equal(run(kernel, base, off), base[:, 2, :])


def test_scalar_offset_written_to_sbuf_destination():
    a = _table(2, 8)

    def kernel(x):
        r = nisa.register_alloc(2)
        s = nl.ndarray((2, 32), nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=s, value=0.0)
        # dst columns [2*8, 2*8 + 8) of each partition: offset 2 * prod(base_shape[2:])... with
        # a (2, 4, 8) view of the tile, indirect_dim=1 selects block 2
        nisa.dma_copy(
            dst=s.reshape((2, 4, 8)).ap([[32, 2], [1, 8]], scalar_offset=r, indirect_dim=1), src=x
        )
        out = nl.ndarray((2, 32), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=s)
        return out

    want = np.zeros((2, 32), np.float32)
    want[:, 16:24] = a
    np.testing.assert_array_equal(run(kernel, a), want)


def test_scalar_offset_out_of_bounds_error_and_skip():
    table = _table(8, 4)

    def kernel(t, oob):
        r = nisa.register_alloc(9)
        rows = nl.ndarray((2, 4), nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=rows, value=7.0)
        nisa.dma_copy(
            dst=rows,
            src=t.ap([[4, 2], [1, 4]], scalar_offset=r),  # ERR
            oob_mode=oob,
        )
        out = nl.ndarray((2, 4), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=rows)
        return out

    with pytest.raises(OutOfBoundsError, match=r"9 is outside \[0, 8\)") as exc:
        run(lambda t: kernel(t, nisa.oob_mode.error), table)
    assert_at_user_line(exc)
    got = run(lambda t: kernel(t, nisa.oob_mode.skip), table)
    np.testing.assert_array_equal(got, np.full((2, 4), 7.0, np.float32))


def test_timing_only_run_records_dynamic_access_with_offset_zero():
    table = _table()
    idx = np.zeros((4, 1), np.int32)

    def kernel(t, ix):
        i_sb = nl.ndarray((4, 1), nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=i_sb, src=ix)
        rows = nl.ndarray((4, 16), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=rows, src=t.ap([[16, 4], [1, 16]], vector_offset=i_sb))
        return t

    kr = run_kernel(kernel, (table, idx), {}, chip="trn3", values=False)
    gather = kr.program[-1]
    assert gather.opcode == "dma_copy"
    assert gather.attrs["src_dynamic"] == "vector"
    src_op = next(o for o in gather.reads if o.name == "src")
    assert src_op.shape == (4, 16)
    assert src_op.region.byte_end - src_op.region.byte_start == table.nbytes  # whole table


# ---------------------------------------------------------------- dma_copy rules
def _copy_error(dst_shape, dst_dtype, chip="trn3", src_fn=None, **kw):
    def kernel(x):
        t = nl.ndarray(dst_shape, dst_dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=src_fn(x) if src_fn else x, **kw)  # ERR
        return x

    return kernel


def _ix_view(x):
    i_sb = nl.ndarray((4, 1), nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=i_sb, value=0)
    return x.ap([[8, 4], [1, 8]], vector_offset=i_sb)


@pytest.mark.parametrize(
    ("dst_shape", "dst_dtype", "kw", "src_fn", "chip", "match"),
    [
        pytest.param((4, 4), nl.float32, {}, None, "trn3", "element counts must match", id="count"),
        pytest.param(
            (4, 8),
            nl.bfloat16,
            {"dge_mode": nisa.dge_mode.hwdge},
            None,
            "trn3",
            "hardware DGE does not cast",
            id="hwdge-cast",
        ),
        pytest.param(
            (4, 8),
            nl.float32,
            {"dge_mode": nisa.dge_mode.hwdge},
            _ix_view,
            "trn3",
            "gather/scatter needs dge_mode.swdge",
            id="hwdge-indirect",
        ),
        pytest.param(
            (4, 8),
            nl.float32,
            {"dge_mode": nisa.dge_mode.hwdge},
            None,
            "trn1",
            "NeuronCore-v3",
            id="hwdge-trn1",
        ),
        pytest.param(
            (4, 8),
            nl.float32,
            {"dge_mode": nisa.dge_mode.none},
            _ix_view,
            "trn3",
            "dge_mode=none with a dynamic address",
            id="dge-none-dynamic",
        ),
        pytest.param(
            (4, 8),
            nl.float32,
            {"engine": nisa.engine.sync},
            None,
            "trn3",
            "needs dge_mode=nisa.dge_mode.hwdge",
            id="engine-without-hwdge",
        ),
        pytest.param(
            (4, 8),
            nl.float32,
            {"engine": nisa.engine.vector, "dge_mode": nisa.dge_mode.hwdge},
            None,
            "trn3",
            "nisa.engine.sync or nisa.engine.scalar",
            id="engine-not-sync-scalar",
        ),
        pytest.param(
            (4, 8),
            nl.float32,
            {"oob_mode": nisa.oob_mode.skip},
            None,
            "trn3",
            "skip applies only to dynamic addressing",
            id="skip-static",
        ),
        pytest.param(
            (4, 8), nl.float32, {"priority": 4}, None, "trn3", r"\[0, 3\]", id="priority-range"
        ),
        pytest.param(
            (4, 8), nl.float32, {"priority": 1}, None, "trn2", "NeuronCore-v4", id="priority-trn2"
        ),
        pytest.param((4, 8), nl.float8_e4m3fn_x4, {}, None, "trn3", "packed MX", id="x4-cast"),
        pytest.param(
            (4, 8),
            nl.float32,
            {"dge_mode": 9},  # no member's value (1 is dge_mode.swdge: test_nkilib_enum_ints)
            None,
            "trn3",
            "nisa.dge_mode member",
            id="dge-raw-int",
        ),
    ],
)
def test_dma_copy_rules(dst_shape, dst_dtype, kw, src_fn, chip, match):
    kernel = _copy_error(dst_shape, dst_dtype, chip, src_fn, **kw)
    with pytest.raises(ConstraintError, match=match) as exc:
        run(kernel, np.zeros((4, 8), np.float32), chip=chip)
    assert_at_user_line(exc)


def test_hwdge_with_engine_and_scalar_offset_is_accepted():
    a = _table(8, 8)

    def kernel(x):
        r = nisa.register_alloc(1)
        t = nl.ndarray((2, 8), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(
            dst=t,
            src=x.ap([[8, 2], [1, 8]], scalar_offset=r),
            dge_mode=nisa.dge_mode.hwdge,
            engine=nisa.engine.scalar,
            priority=2,
        )
        out = nl.ndarray((2, 8), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    np.testing.assert_array_equal(run(kernel, a), a[1:3])


# ---------------------------------------------------------------- Beta-1 dst_rmw_op
def test_dst_rmw_op_add_accumulates_in_fp32():
    a = np.full((2, 4), 1.5, np.float32)

    def kernel(x):
        t = nl.ndarray((2, 4), nl.bfloat16, buffer=nl.sbuf)
        nisa.memset(dst=t, value=256.0)
        _issue("dma_copy", None, dst=t, src=x, dst_rmw_op=np.add)
        out = nl.ndarray((2, 4), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    # 257.5 rounds to bf16 as 258 (RNE at spacing 2)
    np.testing.assert_array_equal(run(kernel, a), np.full((2, 4), 258.0, np.float32))


def test_dst_rmw_scatter_with_repeated_indices_accumulates_each():
    src = np.ones((4, 2), np.float32)
    idx = np.array([[1], [1], [3], [1]], dtype=np.int32)

    def kernel(s, ix):
        i_sb = nl.ndarray((4, 1), nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=i_sb, src=ix)
        s_sb = nl.ndarray((4, 2), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s_sb, src=s)
        out = nl.ndarray((4, 2), nl.float32, buffer=nl.shared_hbm)
        z = nl.ndarray((4, 2), nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=z, value=0.0)
        nisa.dma_copy(dst=out, src=z)
        _issue(
            "dma_copy",
            None,
            dst=out.ap([[2, 4], [1, 2]], vector_offset=i_sb),
            src=s_sb,
            dst_rmw_op=np.add,
        )
        return out

    np.testing.assert_array_equal(run(kernel, src, idx), [[0, 0], [3, 3], [0, 0], [1, 1]])


def test_dst_rmw_op_rules():
    def kernel(x):
        t = nl.ndarray((2, 4), nl.float32, buffer=nl.sbuf)
        _issue("dma_copy", None, dst=t, src=x, dst_rmw_op=np.multiply)  # ERR
        return x

    with pytest.raises(ConstraintError, match=r"only np\.add") as exc:
        run(kernel, np.zeros((2, 4), np.float32))
    assert_at_user_line(exc)


# ---------------------------------------------------------------- dma_transpose
@pytest.mark.parametrize(
    ("shape", "axes"),
    [
        pytest.param((16, 128), (1, 0), id="2d"),
        pytest.param((4, 6, 8), (2, 1, 0), id="3d"),
        pytest.param((2, 3, 4, 5), (3, 1, 2, 0), id="4d"),
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16], ids=["fp32", "bf16"])
def test_dma_transpose_forms(rng, shape, axes, dtype):
    a = rng.standard_normal(shape).astype(dtype)
    want = np.transpose(a, axes)

    def kernel(x):
        t = nl.ndarray(want.shape, x.dtype, buffer=nl.sbuf)
        nisa.dma_transpose(dst=t, src=x, axes=axes)
        out = nl.ndarray(want.shape, x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    np.testing.assert_array_equal(run(kernel, a), want)


@pytest.mark.parametrize("dge", ["hwdge", "none"])
def test_dma_transpose_sbuf_source_and_default_axes(rng, dge):
    """dge_mode none (descriptors built ahead of time) transposes static addresses too, as
    nki-library's mlp_tkg does with its bias."""
    a = rng.standard_normal((16, 128)).astype(ml_dtypes.bfloat16)

    def kernel(x):
        s = nl.ndarray((16, 128), nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=x)
        t = nl.ndarray((128, 16), nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_transpose(dst=t, src=s, dge_mode=getattr(nisa.dge_mode, dge))
        out = nl.ndarray((128, 16), nl.bfloat16, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    np.testing.assert_array_equal(run(kernel, a, chip="trn2"), a.T)


def test_dma_transpose_indirect_gathers_rows_then_transposes(rng):
    src = rng.standard_normal((64, 32)).astype(ml_dtypes.bfloat16)
    idx = rng.permutation(64)[:16].astype(np.uint32).reshape(16, 1)

    def kernel(s, ix):
        i_sb = nl.ndarray((16, 1), nl.uint32, buffer=nl.sbuf)
        nisa.dma_copy(dst=i_sb, src=ix)
        t = nl.ndarray((32, 16), nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_transpose(
            dst=t, src=s.ap([[32, 16], [1, 32]], vector_offset=i_sb, indirect_dim=0), axes=(1, 0)
        )
        out = nl.ndarray((32, 16), nl.bfloat16, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    np.testing.assert_array_equal(run(kernel, src, idx), src[idx[:, 0]].T)


def _transpose_error(src_shape, dst_shape, dtype=nl.float32, chip="trn3", **kw):
    def kernel(x):
        t = nl.ndarray(dst_shape, dtype, buffer=nl.sbuf)
        nisa.dma_transpose(dst=t, src=x, **kw)  # ERR
        return x

    return kernel


@pytest.mark.parametrize(
    ("src", "dst", "np_dtype", "kw", "chip", "match"),
    [
        pytest.param(
            (4, 8), (8, 4), np.float32, {"axes": (0, 1)}, "trn3", r"axes=\(1, 0\)", id="axes"
        ),
        pytest.param(
            (4, 8), (4, 8), np.float32, {}, "trn3", r"transposed shape \[8, 4\]", id="dst-shape"
        ),
        pytest.param((4, 8), (8, 4), np.int8, {}, "trn3", "2- or 4-byte", id="dtype-1byte"),
        pytest.param((4, 8), (8, 4), np.float32, {}, "trn1", "NeuronCore-v3", id="trn1"),
        pytest.param(
            (8, 128),
            (128, 8),
            ml_dtypes.bfloat16,
            {"dge_mode": nisa.dge_mode.hwdge},
            "trn3",
            r"src.shape\[0\] == 16",
            id="hwdge-shape",
        ),
        pytest.param(
            (16, 128),
            (128, 16),
            np.float32,
            {"dge_mode": nisa.dge_mode.hwdge},
            "trn3",
            "2-byte",
            id="hwdge-fp32",
        ),
        pytest.param(
            (16, 64),
            (64, 16),
            ml_dtypes.bfloat16,
            {"dge_mode": nisa.dge_mode.hwdge},
            "trn3",
            "multiple of 128",
            id="hwdge-last-dim",
        ),
        pytest.param(
            (4, 8),
            (8, 4),
            np.float32,
            {"dge_mode": nisa.dge_mode.swdge},
            "trn3",
            "direct transpose takes dge_mode unknown, hwdge or none",
            id="direct-swdge",
        ),
        pytest.param(
            (2, 3, 4, 5, 6), (6, 5, 4, 3, 2), np.float32, {}, "trn3", "2-, 3- or 4-D", id="rank5"
        ),
    ],
)
def test_dma_transpose_rules(src, dst, np_dtype, kw, chip, match):
    dtype = (
        nl.bfloat16
        if np_dtype is ml_dtypes.bfloat16
        else nl.int8
        if np_dtype is np.int8
        else nl.float32
    )
    kernel = _transpose_error(src, dst, dtype, chip, **kw)
    with pytest.raises(ConstraintError, match=match) as exc:
        run(kernel, np.zeros(src, np_dtype), chip=chip)
    assert_at_user_line(exc)


# ---------------------------------------------------------------- dma_compute
def test_dma_compute_sums_sources_in_fp32(rng):
    xs = [rng.standard_normal((8, 16)).astype(np.float32) for _ in range(3)]

    def kernel(a, b, c):
        sa = nl.ndarray((8, 16), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=sa, src=a)
        out = nl.ndarray((8, 16), nl.bfloat16, buffer=nl.shared_hbm)
        nisa.dma_compute(dst=out, srcs=[sa, b, c], reduce_op=nl.add, scales=[1.0, 1.0, 1.0])
        return out

    got = run(kernel, *xs)
    want = ((xs[0] + xs[1]) + xs[2]).astype(ml_dtypes.bfloat16)  # fp32 sum, one final cast
    np.testing.assert_array_equal(got, want)
    exact = xs[0].astype(np.float64) + xs[1] + xs[2]
    np.testing.assert_allclose(got.astype(np.float64), exact, rtol=2**-8, atol=1e-6)


def test_dma_compute_scatter_rmw_with_vector_offset():
    upd = np.arange(8, dtype=np.float32).reshape(4, 2)
    idx = np.array([[2], [0], [2], [5]], dtype=np.int32)
    base = np.full((6, 2), 10.0, np.float32)

    def kernel(b, u, ix):
        i_sb = nl.ndarray((4, 1), nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=i_sb, src=ix)
        u_sb = nl.ndarray((4, 2), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=u_sb, src=u)
        tgt = b.ap([[2, 4], [1, 2]], vector_offset=i_sb)
        nisa.dma_compute(dst=tgt, srcs=[tgt, u_sb], reduce_op=nl.add, unique_indices=False)
        return b

    want = base.copy()
    np.add.at(want, idx[:, 0], upd)
    np.testing.assert_array_equal(run(kernel, base, upd, idx), want)


def test_dma_compute_gather_rmw_with_vector_offset():
    table = _table(8, 4)
    idx = np.array([[7], [1]], dtype=np.int32)

    def kernel(t, ix):
        i_sb = nl.ndarray((2, 1), nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=i_sb, src=ix)
        acc = nl.ndarray((2, 4), nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=acc, value=0.5)
        nisa.dma_compute(
            dst=acc, srcs=[acc, t.ap([[4, 2], [1, 4]], vector_offset=i_sb)], reduce_op=nl.add
        )
        out = nl.ndarray((2, 4), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=acc)
        return out

    np.testing.assert_array_equal(run(kernel, table, idx), table[[7, 1]] + 0.5)


def _compute_error(n_src=2, **kw):
    def kernel(x):
        t = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf)
        kw.setdefault("reduce_op", nl.add)
        nisa.dma_compute(dst=t, srcs=[x] * n_src, **kw)  # ERR
        return x

    return kernel


@pytest.mark.parametrize(
    ("n_src", "kw", "match"),
    [
        pytest.param(2, {"reduce_op": nl.multiply}, "only nl.add", id="reduce-op"),
        pytest.param(2, {"scales": [1.0, 2.0]}, "all scales must be 1.0", id="scales"),
        pytest.param(2, {"scales": [1.0]}, "one scale per source", id="scale-count"),
        pytest.param(17, {}, "at most 16", id="too-many"),
        pytest.param(2, {"oob_mode": nisa.oob_mode.skip}, "skip applies only", id="skip-static"),
    ],
)
def test_dma_compute_rules(n_src, kw, match):
    with pytest.raises(ConstraintError, match=match) as exc:
        run(_compute_error(n_src, **kw), np.zeros((4, 8), np.float32))
    assert_at_user_line(exc)


def test_dma_compute_count_mismatch():
    def kernel(x):
        t = nl.ndarray((4, 4), nl.float32, buffer=nl.sbuf)
        nisa.dma_compute(dst=t, srcs=[x], reduce_op=nl.add)  # ERR
        return x

    with pytest.raises(ConstraintError, match="element counts must match") as exc:
        run(kernel, np.zeros((4, 8), np.float32))
    assert_at_user_line(exc)


def test_dma_compute_duplicate_indices_with_unique_indices_true():
    def kernel(b, ix):
        i_sb = nl.ndarray((2, 1), nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=i_sb, src=ix)
        u = nl.ndarray((2, 2), nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=u, value=1.0)
        tgt = b.ap([[2, 2], [1, 2]], vector_offset=i_sb)
        nisa.dma_compute(dst=tgt, srcs=[tgt, u], reduce_op=nl.add)  # ERR
        return b

    with pytest.raises(ConstraintError, match="unique_indices=True but index 1") as exc:
        run(kernel, np.zeros((4, 2), np.float32), np.array([[1], [1]], np.int32))
    assert_at_user_line(exc)


def test_unknown_instruction_variant_is_not_silently_accepted():
    # dst_rmw_op is Beta 1 only: the GA wrapper rejects it like any unknown keyword.
    def kernel(x):
        t = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x, dst_rmw_op=np.add)
        return x

    with pytest.raises(TypeError, match="dst_rmw_op"):
        run(kernel, np.zeros((4, 8), np.float32))


def _indirect_transpose_error(rows, cols, idx_p, idx_dtype, dtype, **kw):
    def kernel(s):
        i_sb = nl.ndarray((idx_p, 1), idx_dtype, buffer=nl.sbuf)
        nisa.memset(dst=i_sb, value=0)
        v = s.ap([[cols, idx_p], [1, cols]], vector_offset=i_sb)
        t = nl.ndarray((cols, idx_p), dtype, buffer=nl.sbuf)
        nisa.dma_transpose(dst=t, src=v, **kw)  # ERR
        return s

    return kernel


@pytest.mark.parametrize(
    ("cols", "idx_p", "idx_dtype", "np_dtype", "kw", "match"),
    [
        pytest.param(
            32,
            16,
            nl.uint32,
            ml_dtypes.bfloat16,
            {"dge_mode": nisa.dge_mode.hwdge},
            "takes dge_mode unknown or swdge",
            id="hwdge",
        ),
        pytest.param(32, 16, nl.uint32, np.float32, {}, "2-byte dtypes only", id="fp32"),
        pytest.param(32, 8, nl.uint32, ml_dtypes.bfloat16, {}, "a multiple of 16", id="rows"),
        pytest.param(32, 16, nl.int32, ml_dtypes.bfloat16, {}, "uint32 indices", id="idx-dtype"),
    ],
)
def test_dma_transpose_indirect_rules(cols, idx_p, idx_dtype, np_dtype, kw, match):
    dtype = nl.bfloat16 if np_dtype is ml_dtypes.bfloat16 else nl.float32
    kernel = _indirect_transpose_error(64, cols, idx_p, idx_dtype, dtype, **kw)
    with pytest.raises(ConstraintError, match=match) as exc:
        run(kernel, np.zeros((64, cols), np_dtype))
    assert_at_user_line(exc)


def test_dma_compute_vector_form_takes_two_sources():
    def kernel(b):
        i_sb = nl.ndarray((2, 1), nl.int32, buffer=nl.sbuf)
        nisa.memset(dst=i_sb, value=0)
        u = nl.ndarray((2, 2), nl.float32, buffer=nl.sbuf)
        tgt = b.ap([[2, 2], [1, 2]], vector_offset=i_sb)
        nisa.dma_compute(dst=tgt, srcs=[tgt, u, u], reduce_op=nl.add)  # ERR
        return b

    with pytest.raises(ConstraintError, match="exactly two sources") as exc:
        run(kernel, np.zeros((4, 2), np.float32))
    assert_at_user_line(exc)


def test_dma_compute_rejects_packed_dtypes():
    def kernel(x):
        t = nl.ndarray((4, 8), nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        nisa.dma_compute(dst=t, srcs=[x, x], reduce_op=nl.add)  # ERR
        return x

    with pytest.raises(ConstraintError, match="unpacked dtypes only") as exc:
        run(kernel, np.zeros((4, 8), np.float32))
    assert_at_user_line(exc)


def test_dst_rmw_op_needs_oob_mode_error():
    def kernel(x, ix):
        i_sb = nl.ndarray((2, 1), nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=i_sb, src=ix)
        t = nl.ndarray((2, 4), nl.float32, buffer=nl.sbuf)
        v = x.ap([[4, 2], [1, 4]], vector_offset=i_sb)
        _issue(
            "dma_copy", None, dst=v, src=t, dst_rmw_op=np.add, oob_mode=nisa.oob_mode.skip
        )  # ERR
        return x

    with pytest.raises(ConstraintError, match=r"needs oob_mode\.error") as exc:
        run(kernel, np.zeros((4, 4), np.float32), np.zeros((2, 1), np.int32))
    assert_at_user_line(exc)


def test_dma_rejects_compute_engine_tensor_indirection():
    def kernel(x):
        idx = nl.ndarray((4, 2), nl.int32, buffer=nl.sbuf)
        nisa.memset(dst=idx, value=0)
        s = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s.indirect(idx, num_elem=8), src=x)  # ERR
        return x

    with pytest.raises(ConstraintError, match="tensor indirection") as exc:
        run(kernel, np.zeros((4, 8), np.float32))
    assert_at_user_line(exc)
