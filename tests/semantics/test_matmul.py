"""Tensor Engine semantics (nc_matmul, nc_matmul_mx, nc_transpose, quantize_mx) vs numpy.

References are float64 products of the stored (already rounded) inputs, rounded to fp32 once:
the simulator's documented accumulation model, so tolerances are one fp32 ulp.
"""

from __future__ import annotations

import inspect
import warnings

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from source_paths import assert_no_internal_path

from trnsim import dtypes as dt
from trnsim.errors import ConstraintError, SimulationWarning, UnsupportedError

F32_RTOL = 3e-7  # one fp32 ulp: float64 summation order may flip a rounding tie

# ---------------------------------------------------------------- helpers


def load(t, dtype=None):
    """HBM -> new SBUF tile (DMA casts when dtype differs)."""
    s = nl.ndarray(t.shape, dtype or t.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=t)
    return s


def store(tile):
    """SBUF/PSUM tile -> new HBM tensor of the same dtype (bit-exact copies)."""
    if tile.buffer.space == "psum":
        sb = nl.ndarray(tile.shape, tile.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=sb, src=tile)
        tile = sb
    out = nl.ndarray(tile.shape, tile.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=tile)
    return out


def ref_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """stationary.T @ moving with K on axis 0, in float64 via einsum, rounded to fp32."""
    return np.einsum("km,kn->mn", a.astype(np.float64), b.astype(np.float64)).astype(np.float32)


def bad_lines(kernel) -> list[int]:
    """Lines of the kernel marked `# BAD` (where the error must point)."""
    lines, start = inspect.getsourcelines(kernel)
    return [start + i for i, line in enumerate(lines) if "# BAD" in line]


def expect_error(kernel, arrays, match, chip="trn3", exc_type=ConstraintError):
    """The kernel fails with `match` at its own `# BAD` line, with no internal path shown."""
    with pytest.raises(exc_type, match=match) as exc:
        nki.simulate(kernel, chip=chip)(*arrays)
    assert exc.value.loc is not None
    assert exc.value.loc.lineno in bad_lines(kernel)
    assert_no_internal_path(str(exc.value))


def run(kernel, *arrays, chip="trn3"):
    return nki.simulate(kernel, chip=chip)(*arrays)


def _rand(rng, shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(np.float32).astype(dtype)


# ---------------------------------------------------------------- nc_matmul values


def _mm_kernel(a, b):
    at, bt = load(a), load(b)
    ps = nl.ndarray((a.shape[1], b.shape[1]), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(ps, at, bt)
    return store(ps)


@pytest.mark.parametrize("chip", ["trn1", "trn2", "trn3"])
@pytest.mark.parametrize(
    ("sdt", "mdt"),
    [
        (np.float32, np.float32),
        (ml_dtypes.bfloat16, ml_dtypes.bfloat16),
        (np.float16, np.float16),
        (ml_dtypes.float8_e4m3, ml_dtypes.float8_e4m3),
        (ml_dtypes.float8_e5m2, ml_dtypes.float8_e5m2),
        (ml_dtypes.bfloat16, ml_dtypes.float8_e5m2),
        (np.float16, ml_dtypes.bfloat16),
    ],
    ids=lambda d: np.dtype(d).name,
)
def test_nc_matmul_matches_float64_reference(rng, chip, sdt, mdt):
    """dst = stationary.T @ moving for every input dtype pair (fp32 accumulation)."""
    a, b = _rand(rng, (128, 96), sdt), _rand(rng, (128, 512), mdt)
    out = run(_mm_kernel, a, b, chip=chip)
    np.testing.assert_allclose(out, ref_matmul(a, b), rtol=F32_RTOL, atol=1e-30)


def test_nc_matmul_tfloat32_inputs_are_rounded_to_10_bits(rng):
    def kernel(a, b):
        at = nl.ndarray(a.shape, nl.tfloat32, buffer=nl.sbuf)
        bt = nl.ndarray(b.shape, nl.tfloat32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=at, src=load(a))  # fp32 -> tf32: RNE to 10 mantissa bits
        nisa.tensor_copy(dst=bt, src=load(b))
        ps = nl.ndarray((64, 128), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(ps, at, bt)
        return store(ps)

    a, b = _rand(rng, (128, 64)), _rand(rng, (128, 128))
    ref = ref_matmul(dt.cast(a, "tfloat32"), dt.cast(b, "tfloat32"))
    np.testing.assert_allclose(run(kernel, a, b), ref, rtol=F32_RTOL)
    assert not np.allclose(ref, ref_matmul(a, b), rtol=1e-6)  # the rounding is visible


def test_nc_matmul_e4m3fn_on_trn3(rng):
    a = _rand(rng, (64, 32), ml_dtypes.float8_e4m3fn)
    b = _rand(rng, (64, 48), ml_dtypes.float8_e5m2)
    np.testing.assert_allclose(run(_mm_kernel, a, b), ref_matmul(a, b), rtol=F32_RTOL)


def test_nc_matmul_flattens_extra_free_dims(rng):
    def kernel(a, b):
        at, bt = load(a), load(b)
        ps = nl.ndarray((8 * 4, 2 * 64), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(ps, at, bt)
        return store(ps)

    a, b = _rand(rng, (32, 8, 4)), _rand(rng, (32, 2, 64))
    ref = ref_matmul(a.reshape(32, -1), b.reshape(32, -1))
    np.testing.assert_allclose(run(kernel, a, b), ref, rtol=F32_RTOL)


def test_nc_matmul_bf16_dst_on_trn3_rounds_and_accumulates_in_fp32(rng):
    def kernel(a, b):
        at, bt = load(a), load(b)
        ps = nl.ndarray((128, 256), nl.bfloat16, buffer=nl.psum)
        nisa.nc_matmul(ps, at[0:128, 0:128], bt[0:128, :], accumulate=False)
        nisa.nc_matmul(ps, at[0:128, 128:256], bt[0:128, :], accumulate=True)
        return store(ps)

    a, b = _rand(rng, (128, 256), ml_dtypes.bfloat16), _rand(rng, (128, 256), ml_dtypes.bfloat16)
    first = ref_matmul(a[:, :128], b).astype(ml_dtypes.bfloat16)
    second = ref_matmul(a[:, 128:], b)
    ref = (first.astype(np.float32) + second).astype(ml_dtypes.bfloat16)
    out = run(kernel, a, b)
    assert out.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(out.view(np.uint16), ref.view(np.uint16))


def test_nc_matmul_moving_up_to_8192_with_bf16_dst_on_trn3(rng):
    def kernel(a, b):
        at, bt = load(a), load(b)
        ps = nl.ndarray((16, 8192), nl.bfloat16, buffer=nl.psum)
        nisa.nc_matmul(ps, at, bt)
        return store(ps)

    a, b = _rand(rng, (32, 16), ml_dtypes.bfloat16), _rand(rng, (32, 8192), ml_dtypes.bfloat16)
    out = run(kernel, a, b)
    ref = ref_matmul(a, b).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(out.view(np.uint16), ref.view(np.uint16))


# ---------------------------------------------------------------- PSUM accumulation


def _k_tiles_kernel(modes):
    def kernel(a, b):
        at, bt = load(a), load(b)
        ps = nl.ndarray((64, 256), nl.float32, buffer=nl.psum)
        for k in range(4):
            nisa.nc_matmul(
                ps, at[k * 32 : (k + 1) * 32, :], bt[k * 32 : (k + 1) * 32, :], accumulate=modes[k]
            )
        return store(ps)

    return kernel


@pytest.mark.parametrize(
    ("modes", "tiles"),
    [
        ((None, None, None, None), (0, 1, 2, 3)),
        ((False, True, True, True), (0, 1, 2, 3)),
        ((None, False, None, True), (1, 2, 3)),
        ((False, False, False, False), (3,)),
    ],
    ids=["auto", "false-then-true", "restart-mid-group", "overwrite"],
)
def test_psum_accumulation_over_k_tiles(rng, modes, tiles):
    """fp32 PSUM: each instruction's product rounds to fp32, then adds in fp32."""
    a, b = _rand(rng, (128, 64), ml_dtypes.bfloat16), _rand(rng, (128, 256), ml_dtypes.bfloat16)
    parts = [ref_matmul(a[k * 32 : (k + 1) * 32], b[k * 32 : (k + 1) * 32]) for k in range(4)]
    ref = parts[tiles[0]]
    for k in tiles[1:]:
        ref = ref + parts[k]  # fp32 + fp32
    np.testing.assert_allclose(run(_k_tiles_kernel(modes), a, b), ref, rtol=F32_RTOL)


def test_accumulate_true_onto_never_written_psum_warns(rng):
    a, b = _rand(rng, (128, 64)), _rand(rng, (128, 256))
    with pytest.warns(SimulationWarning, match="accumulate=True onto 16384 PSUM element"):
        out = run(_k_tiles_kernel((True, True, True, True)), a, b)
    assert np.isnan(out).all()  # the poison of fresh PSUM shows through


def test_auto_accumulation_is_tracked_per_element(rng):
    """Overlapping PSUM writes: the overlap adds, the fresh part overwrites."""

    def kernel(a, b):
        at, bt = load(a), load(b)
        ps = nl.ndarray((64, 384), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(ps[:, 0:256], at, bt[:, 0:256])
        nisa.nc_matmul(ps[:, 128:384], at, bt[:, 256:512])
        return store(ps)

    a, b = _rand(rng, (64, 64)), _rand(rng, (64, 512))
    out = run(kernel, a, b)
    p1, p2 = ref_matmul(a, b[:, :256]), ref_matmul(a, b[:, 256:])
    np.testing.assert_allclose(out[:, :128], p1[:, :128], rtol=F32_RTOL)
    np.testing.assert_allclose(out[:, 128:256], p1[:, 128:] + p2[:, :128], rtol=F32_RTOL)
    np.testing.assert_allclose(out[:, 256:], p2[:, 128:], rtol=F32_RTOL)


def test_auto_accumulation_adds_onto_psum_written_by_another_engine(rng):
    """Any write counts (GA: 'whether this PSUM location was previously written')."""

    def kernel(a, b):
        at, bt = load(a), load(b)
        ps = nl.ndarray((32, 64), nl.float32, buffer=nl.psum)
        nisa.memset(ps, 1.5)
        nisa.nc_matmul(ps, at, bt)
        return store(ps)

    a, b = _rand(rng, (32, 32)), _rand(rng, (32, 64))
    np.testing.assert_allclose(run(kernel, a, b), ref_matmul(a, b) + np.float32(1.5), rtol=F32_RTOL)


def test_fresh_psum_allocation_restarts_auto_accumulation(rng):
    def kernel(a, b):
        at, bt = load(a), load(b)
        first = nl.ndarray((32, 64), nl.float32, buffer=nl.psum, address=(0, 0))
        nisa.nc_matmul(first, at, bt)
        nisa.nc_matmul(first, at, bt)  # accumulates: 2x
        out1 = store(first)
        second = nl.ndarray((32, 64), nl.float32, buffer=nl.psum, address=(0, 0))
        nisa.nc_matmul(second, at, bt)  # same words, new allocation: overwrites
        return out1, store(second)

    a, b = _rand(rng, (32, 32)), _rand(rng, (32, 64))
    out1, out2 = run(kernel, a, b)
    p = ref_matmul(a, b)
    np.testing.assert_allclose(out1, p + p, rtol=F32_RTOL)
    np.testing.assert_allclose(out2, p, rtol=F32_RTOL)


def test_tiled_matmul_ga_example_kernel(rng):
    """The GA tutorial shape: K = 512 accumulated in PSUM over 4 tiles of 128."""

    def matmul_kernel(lhs_t, rhs):
        k, m = lhs_t.shape
        n = rhs.shape[1]
        result = nl.ndarray((m, n), nl.float32, buffer=nl.shared_hbm)
        res_psum = nl.ndarray((m, n), nl.float32, buffer=nl.psum)
        for kt in nl.affine_range(k // 128):
            lhs_tile = nl.ndarray((128, m), lhs_t.dtype, buffer=nl.sbuf)
            rhs_tile = nl.ndarray((128, n), rhs.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=lhs_tile, src=lhs_t[kt * 128 : (kt + 1) * 128, 0:m])
            nisa.dma_copy(dst=rhs_tile, src=rhs[kt * 128 : (kt + 1) * 128, 0:n])
            nisa.nc_matmul(dst=res_psum, stationary=lhs_tile, moving=rhs_tile)
        res_sb = nl.ndarray((m, n), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res_sb, src=res_psum)
        nisa.dma_copy(dst=result, src=res_sb)
        return result

    a, b = _rand(rng, (512, 128), ml_dtypes.bfloat16), _rand(rng, (512, 512), ml_dtypes.bfloat16)
    ref = ref_matmul(a[0:128], b[0:128])
    for kt in range(1, 4):
        ref = ref + ref_matmul(a[kt * 128 : (kt + 1) * 128], b[kt * 128 : (kt + 1) * 128])
    for chip in ("trn2", "trn3"):
        out = run(matmul_kernel, a, b, chip=chip)
        np.testing.assert_allclose(out, ref, rtol=F32_RTOL)
    np.testing.assert_allclose(
        out, a.astype(np.float64).T @ b.astype(np.float64), rtol=1e-4, atol=1e-4
    )


# ---------------------------------------------------------------- tiling and perf modes


def test_tile_position_quadrants_land_in_their_psum_rows(rng):
    """Four 32x32 stationaries on the four column tiles of the PE array (trn2)."""

    def kernel(a, b):
        at, bt = load(a), load(b)
        ps = nl.ndarray((128, 64), nl.float32, buffer=nl.psum)
        for j in range(4):
            nisa.nc_matmul(
                ps[32 * j : 32 * (j + 1), :],
                at[0:32, 32 * j : 32 * (j + 1)],
                bt[0:32, :],
                tile_position=(0, 32 * j),
                tile_size=(32, 32),
            )
        return store(ps)

    a, b = _rand(rng, (32, 128)), _rand(rng, (32, 64))
    out = run(kernel, a, b, chip="trn2")
    for j in range(4):
        np.testing.assert_allclose(
            out[32 * j : 32 * (j + 1)], ref_matmul(a[:, 32 * j : 32 * (j + 1)], b), rtol=F32_RTOL
        )


def test_four_by_four_pe_quadrants_accumulate_per_column_tile(rng):
    """Row tile i contracts K rows [32i, 32i+32); column tile j writes PSUM rows [32j, 32j+32);
    the four row tiles of a column accumulate (accumulate=None) in that column's rows."""

    def kernel(a, b):
        at, bt = load(a), load(b)
        ps = nl.ndarray((128, 64), nl.float32, buffer=nl.psum)
        for i in range(4):
            for j in range(4):
                nisa.nc_matmul(
                    ps[32 * j : 32 * (j + 1), :],
                    at[32 * i : 32 * (i + 1), 32 * j : 32 * (j + 1)],
                    bt[32 * i : 32 * (i + 1), :],
                    tile_position=(32 * i, 32 * j),
                    tile_size=(32, 32),
                )
        return store(ps)

    a, b = _rand(rng, (128, 128)), _rand(rng, (128, 64))
    out = run(kernel, a, b, chip="trn2")
    for j in range(4):
        ref = ref_matmul(a[0:32, 32 * j : 32 * (j + 1)], b[0:32])
        for i in range(1, 4):
            ref = ref + ref_matmul(
                a[32 * i : 32 * (i + 1), 32 * j : 32 * (j + 1)], b[32 * i : 32 * (i + 1)]
            )
        np.testing.assert_allclose(out[32 * j : 32 * (j + 1)], ref, rtol=F32_RTOL)


def test_row_tiles_on_trn1_use_64_row_halves(rng):
    def kernel(a, b):
        at, bt = load(a), load(b)
        ps = nl.ndarray((128, 64), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(ps, at[0:64, :], bt[0:64, :], tile_position=(0, 0), tile_size=(64, 128))
        nisa.nc_matmul(ps, at[64:128, :], bt[64:128, :], tile_position=(64, 0), tile_size=(64, 128))
        return store(ps)

    a, b = _rand(rng, (128, 128)), _rand(rng, (128, 64))
    ref = ref_matmul(a[:64], b[:64]) + ref_matmul(a[64:], b[64:])
    np.testing.assert_allclose(run(kernel, a, b, chip="trn1"), ref, rtol=F32_RTOL)


@pytest.mark.parametrize("chip", ["trn2", "trn3"])
def test_double_row_contracts_over_partitions_and_pair(rng, chip):
    def kernel(a, b):
        at, bt = load(a), load(b)
        ps = nl.ndarray((32, 128), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(ps, at, bt, perf_mode=nisa.matmul_perf_mode.double_row)
        return store(ps)

    a = _rand(rng, (128, 2, 32), ml_dtypes.float8_e4m3)
    b = _rand(rng, (128, 2, 128), ml_dtypes.float8_e5m2)
    ref = ref_matmul(a.reshape(256, 32), b.reshape(256, 128))
    out = run(kernel, a, b, chip=chip)
    np.testing.assert_allclose(out, ref, rtol=F32_RTOL)


def test_matmul_attrs_are_recorded_for_timing(rng):
    from trnsim.nki.runner import run_kernel

    def kernel(a, b):
        at, bt = load(a), load(b)
        ps = nl.ndarray((32, 128), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(
            ps, at, bt, perf_mode=nisa.matmul_perf_mode.double_row, is_moving_onezero=True
        )
        return store(ps)

    a = _rand(rng, (64, 2, 32), ml_dtypes.float8_e4m3)
    b = _rand(rng, (64, 2, 128), ml_dtypes.float8_e4m3)
    rec = run_kernel(kernel, (a, b), {}, chip="trn2")
    mm = next(i for i in rec.program if i.opcode == "nc_matmul")
    assert mm.engine == "tensor"
    assert mm.attrs["perf_mode"] == "double_row"
    assert mm.attrs["is_moving_onezero"] is True
    assert mm.attrs["is_transpose"] is False
    assert {o.dtype for o in mm.reads} == {"float8_e4m3"}


# ---------------------------------------------------------------- transposes


def _bf16_with_specials(rng, shape):
    x = _rand(rng, shape, ml_dtypes.bfloat16)
    x[0, 0], x[1, 2], x[2, 1], x[3, 3] = np.nan, np.inf, -np.inf, -0.0
    return x


@pytest.mark.parametrize("chip", ["trn2", "trn3"])
def test_transpose_mode_is_bit_exact_with_nan_and_inf(rng, chip):
    def kernel(x, ident):
        xt, it = load(x), load(ident)
        ps = nl.ndarray((x.shape[1], x.shape[0]), x.dtype, buffer=nl.psum)
        nisa.nc_matmul(ps, xt, it, is_transpose=True)
        return store(ps)

    x = _bf16_with_specials(rng, (64, 96))
    ident = np.eye(64, dtype=ml_dtypes.bfloat16)
    out = run(kernel, x, ident, chip=chip)
    np.testing.assert_array_equal(out.view(np.uint16), x.T.view(np.uint16))


def test_transpose_mode_fp32_and_fp8_to_16_bit(rng):
    def kernel(x, y, ident):
        xt, yt, it = load(x), load(y), load(ident)
        px = nl.ndarray((x.shape[1], 32), nl.float32, buffer=nl.psum)
        py = nl.ndarray((y.shape[1], 32), nl.bfloat16, buffer=nl.psum)
        nisa.nc_matmul(px, xt, it, is_transpose=True)
        nisa.nc_matmul(py, yt, it, is_transpose=True)
        return store(px), store(py)

    x = _rand(rng, (32, 16))
    x[0, 0] = np.nan
    y = _rand(rng, (32, 8), ml_dtypes.float8_e4m3)
    ident = np.eye(32, dtype=np.float32)
    ox, oy = run(kernel, x, y, ident, chip="trn2")
    np.testing.assert_array_equal(ox.view(np.uint32), x.T.view(np.uint32))
    np.testing.assert_array_equal(oy.view(np.uint16), y.T.view(np.uint8).astype(np.uint16))


def test_transpose_on_trn1_is_an_identity_matmul_that_spreads_nan(rng):
    def kernel(x):
        xt = load(x)
        ps = nl.ndarray((x.shape[1], x.shape[0]), x.dtype, buffer=nl.psum)
        nisa.nc_transpose(ps, xt, engine=nisa.engine.tensor)
        return store(ps)

    x = _rand(rng, (64, 48))
    x[5, 7] = np.nan
    out = run(kernel, x, chip="trn1")
    assert np.isnan(out[7]).all()  # NaN * 0 poisons the whole output row
    keep = np.ones(48, dtype=bool)
    keep[7] = False
    np.testing.assert_array_equal(out[keep], x.T[keep])


def test_is_transpose_on_trn1_is_only_a_hint(rng):
    """NC-v2 has no transpose mode: an identity matmul in fp32 (dst float32), Inf spreads."""

    def kernel(x, ident):
        xt, it = load(x), load(ident)
        ps = nl.ndarray((x.shape[1], x.shape[0]), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(ps, xt, it, is_transpose=True)
        return store(ps)

    x = _rand(rng, (32, 16), ml_dtypes.bfloat16)
    x[3, 2] = np.inf
    out = run(kernel, x, np.eye(32, dtype=ml_dtypes.bfloat16), chip="trn1")
    assert out[2, 3] == np.inf
    assert np.isnan(np.delete(out[2], 3)).all()  # inf * 0 = NaN
    np.testing.assert_array_equal(
        np.delete(out, 2, axis=0), np.delete(x.T.astype(np.float32), 2, axis=0)
    )


def test_nc_transpose_engines_and_default_choice(rng):
    from trnsim.nki.runner import run_kernel

    def kernel(big, small):
        bt, st = load(big), load(small)
        pbig = nl.ndarray((big.shape[1], big.shape[0]), big.dtype, buffer=nl.psum)
        nisa.nc_transpose(pbig, bt)  # > 32x32: Tensor Engine
        psmall = nl.ndarray((small.shape[1], small.shape[0]), small.dtype, buffer=nl.psum)
        nisa.nc_transpose(psmall, st)  # <= 32x32: Vector Engine
        back = nl.ndarray(small.shape, small.dtype, buffer=nl.sbuf)
        nisa.nc_transpose(back, psmall)  # PSUM -> SBUF: Vector Engine
        return store(pbig), store(psmall), store(back)

    big = _bf16_with_specials(rng, (128, 80))
    small = rng.integers(-(2**31), 2**31 - 1, size=(24, 16), dtype=np.int32)
    rec = run_kernel(kernel, (big, small), {}, chip="trn3")
    engines = [i.engine for i in rec.program if i.opcode == "nc_transpose"]
    assert engines == ["tensor", "vector", "vector"]
    obig, osmall, oback = rec.outputs
    np.testing.assert_array_equal(obig.view(np.uint16), big.T.view(np.uint16))
    np.testing.assert_array_equal(osmall, small.T)
    np.testing.assert_array_equal(oback, small)


# ---------------------------------------------------------------- MX


def _mx_kernel(elem_dtype, dst_dtype, p):
    def kernel(s_src, m_src):
        s_sb, m_sb = load(s_src), load(m_src)
        scale_p = 4 if p == 32 else p
        qs = nl.ndarray((p, s_src.shape[1] // 4), elem_dtype, buffer=nl.sbuf)
        ss = nl.ndarray((scale_p, s_src.shape[1] // 4), nl.uint8, buffer=nl.sbuf)
        qm = nl.ndarray((p, m_src.shape[1] // 4), elem_dtype, buffer=nl.sbuf)
        sm = nl.ndarray((scale_p, m_src.shape[1] // 4), nl.float8_e8m0fnu, buffer=nl.sbuf)
        nisa.quantize_mx(dst=qs, src=s_sb, dst_scale=ss)
        nisa.quantize_mx(dst=qm, src=m_sb, dst_scale=sm)
        ps = nl.ndarray((qs.shape[1], qm.shape[1]), dst_dtype, buffer=nl.psum)
        nisa.nc_matmul_mx(dst=ps, stationary=qs, moving=qm, stationary_scale=ss, moving_scale=sm)
        return store(ps), store(qs), store(ss), store(qm), store(sm)

    return kernel


def _dequant(words: np.ndarray, scales: np.ndarray, elem) -> np.ndarray:
    """x4 words [P, F] + scale view -> float64 [P, F, 4], decoded independently of trnsim."""
    p, f = words.shape
    vals = words.view(np.uint8).reshape(p, f, 4).view(elem).astype(np.float64)
    codes = scales.view(np.uint8).reshape(scales.shape[0], f)
    rows = 32 * (np.arange(p) // 32) + (np.arange(p) % 32) // 8
    return vals * np.exp2(codes[rows].astype(np.float64) - 127)[:, :, None]


@pytest.mark.parametrize(("elem", "emax"), [("float8_e4m3fn_x4", 8), ("float8_e5m2_x4", 15)])
@pytest.mark.parametrize("dst_dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("p", [128, 32])
def test_quantize_mx_then_matmul_mx_round_trip(rng, elem, emax, dst_dtype, p):
    m, n = 16, 64
    s_src = (rng.standard_normal((p, 4 * m)) * rng.uniform(0.01, 100, (p, 1))).astype(
        ml_dtypes.bfloat16
    )
    m_src = rng.standard_normal((p, 4 * n)).astype(ml_dtypes.bfloat16)
    s_src[0:8, 0:4] = 0  # an all-zero group gets the smallest scale, 2^-127
    out, qs, ss, qm, sm = run(
        _mx_kernel(getattr(nl, elem), getattr(nl, dst_dtype), p), s_src, m_src
    )
    e = ml_dtypes.float8_e4m3fn if emax == 8 else ml_dtypes.float8_e5m2
    ds, dm = _dequant(qs, ss, e), _dequant(qm, sm, e)
    # scales: 2^(floor(log2(amax)) - (emax - 1)) per 8 partitions x 4 values
    grp = np.abs(s_src.astype(np.float64)).reshape(p // 8, 8, m, 4).max(axis=(1, 3))
    with np.errstate(divide="ignore"):
        want = np.where(grp > 0, np.floor(np.log2(grp)) - (emax - 1) + 127, 0)
    rows = 32 * (np.arange(p // 8) // 4) + np.arange(p // 8) % 4
    np.testing.assert_array_equal(ss[rows].astype(np.int64), want.astype(np.int64))
    # the data: within half an fp8 ulp of src / scale
    rel = 2.0**-4 if emax == 8 else 2.0**-3
    err = np.abs(ds - s_src.astype(np.float64).reshape(p, m, 4))
    bound = np.repeat(grp, 8, axis=0)[:, :, None] * rel
    assert (err <= bound + 1e-30).all()
    # the matmul: exact products of the dequantised values, rounded once
    ref = np.einsum("pmj,pnj->mn", ds, dm).astype(np.float32)
    if dst_dtype == "bfloat16":
        np.testing.assert_array_equal(
            out.view(np.uint16), ref.astype(ml_dtypes.bfloat16).view(np.uint16)
        )
    else:
        np.testing.assert_allclose(out, ref, rtol=F32_RTOL, atol=1e-30)
    true = np.einsum(
        "pmj,pnj->mn",
        s_src.astype(np.float64).reshape(p, m, 4),
        m_src.astype(np.float64).reshape(p, n, 4),
    )
    assert np.abs(out.astype(np.float64) - true).max() < 0.1 * np.abs(true).max()


def test_matmul_mx_mixes_fp4_with_fp8_and_accumulates(rng):
    """MXFP4 stationary x MXFP8 moving (allowed), twice into the same PSUM tile."""

    def kernel(qs, ss, qm, sm):
        a = nl.ndarray(qs.shape, nl.float4_e2m1fn_x4, buffer=nl.sbuf)
        c = nl.ndarray(qm.shape, nl.float8_e5m2_x4, buffer=nl.sbuf)
        _raw_copy(a, qs)
        _raw_copy(c, qm)
        b, d = load(ss), load(sm)
        ps = nl.ndarray((qs.shape[1], qm.shape[1]), nl.float32, buffer=nl.psum)
        nisa.nc_matmul_mx(ps, a, c, b, d)
        nisa.nc_matmul_mx(ps, a, c, b, d, accumulate=True)
        return store(ps)

    p = 64
    scodes = rng.integers(0, 16, size=(p, 8, 4), dtype=np.uint8)  # fp4: one nibble per value
    qs = (scodes.astype(np.uint16) << (4 * np.arange(4, dtype=np.uint16))).sum(
        axis=-1, dtype=np.uint16
    )
    mvals = rng.standard_normal((p, 32, 4)).astype(ml_dtypes.float8_e5m2)
    qm = mvals.view(np.uint8).reshape(p, 32, 4).copy().view(np.uint32).reshape(p, 32)
    ss = rng.integers(120, 134, size=(p, 8), dtype=np.uint8)
    sm = rng.integers(120, 134, size=(p, 32), dtype=np.uint8)
    rows = 32 * (np.arange(p) // 32) + (np.arange(p) % 32) // 8
    ds = (
        scodes.view(ml_dtypes.float4_e2m1fn).astype(np.float64)
        * np.exp2(ss[rows].astype(np.float64) - 127)[:, :, None]
    )
    dm = mvals.astype(np.float64) * np.exp2(sm[rows].astype(np.float64) - 127)[:, :, None]
    once = np.einsum("pmj,pnj->mn", ds, dm).astype(np.float32)
    np.testing.assert_allclose(run(kernel, qs, ss, qm, sm), once + once, rtol=F32_RTOL, atol=1e-30)


def _raw_copy(dst_tile, src_hbm):
    """HBM uint words -> SBUF packed tile, bit for bit (reinterpreting the SBUF tile)."""
    from trnsim.memory import Layout

    stage = nl.ndarray(src_hbm.shape, src_hbm.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=stage, src=src_hbm)
    raw = type(dst_tile)(
        dst_tile.buffer, Layout(stage.dtype, dst_tile.offset, dst_tile.shape, dst_tile.strides)
    )
    nisa.tensor_copy(dst=raw, src=stage)


# ---------------------------------------------------------------- errors


def _ab(k=128, m=128, n=512, dtype=np.float32):
    return np.zeros((k, m), dtype), np.zeros((k, n), dtype)


def test_error_moving_free_size_on_trn2():
    def kernel(a, b):
        at, bt = load(a), load(b)
        ps = nl.ndarray((128, 640), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(ps, at, bt)  # BAD

    expect_error(
        kernel,
        _ab(n=640),
        r"operand 'moving' has free size 640; at most 512 "
        r"\(gemm_moving_fmax\)",
        chip="trn2",
    )


def test_error_moving_free_size_on_trn3_depends_on_dst_dtype():
    def kernel(a, b):
        at, bt = load(a), load(b)
        ps = nl.ndarray((8, 4096), nl.float32, buffer=nl.psum)  # the most PSUM can hold
        nisa.nc_matmul(ps, at, bt)  # BAD

    expect_error(
        kernel,
        _ab(k=16, m=8, n=4608, dtype=ml_dtypes.bfloat16),
        r"free size 4608; at most 4096 \(NC-v4: the PSUM banks of a float32 dst\)",
    )


def test_error_stationary_free_size():
    def kernel(a, b):
        at, bt = load(a), load(b)
        ps = nl.ndarray((128, 64), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(ps, at, bt)  # BAD

    expect_error(
        kernel, _ab(k=32, m=160, n=64), r"operand 'stationary' has free size 160; at most 128"
    )


def test_error_contraction_partitions_differ():
    def kernel(a, b):
        at, bt = load(a), load(b)
        ps = nl.ndarray((64, 64), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(ps, at, bt[0:32, :])  # BAD

    expect_error(
        kernel,
        _ab(k=64, m=64, n=64),
        r"same partition count: got stationary=64, "
        r"moving=32",
    )


def test_error_dst_shape():
    def kernel(a, b):
        at, bt = load(a), load(b)
        ps = nl.ndarray((64, 128), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(ps, at, bt)  # BAD

    expect_error(
        kernel,
        _ab(k=32, m=64, n=64),
        r"dst has 64 partitions x 128 elements.*the "
        r"result is \[64, 64\]",
    )


def test_error_dst_in_sbuf():
    def kernel(a, b):
        at, bt = load(a), load(b)
        out = nl.ndarray((64, 64), nl.float32, buffer=nl.sbuf)
        nisa.nc_matmul(out, at, bt)  # BAD

    expect_error(kernel, _ab(k=32, m=64, n=64), r"operand 'dst' is in sbuf; allowed: psum")


def test_error_integer_inputs():
    def kernel(a, b):
        at, bt = load(a), load(b)
        ps = nl.ndarray((64, 64), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(ps, at, bt)  # BAD

    expect_error(
        kernel,
        _ab(k=32, m=64, n=64, dtype=np.int8),
        r"operand 'stationary' has dtype int8; allowed on trn3: float8_e4m3",
    )


def test_error_fp32_paired_with_bf16():
    def kernel(a, b):
        at, bt = load(a), load(b, nl.bfloat16)
        ps = nl.ndarray((64, 64), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(ps, at, bt)  # BAD

    expect_error(
        kernel,
        _ab(k=32, m=64, n=64),
        r"stationary is float32 and moving is bfloat16;"
        r" a float32/tfloat32 operand must be paired with float32/tfloat32",
    )


def test_error_mixing_e4m3_flavours():
    def kernel(a, b):
        at, bt = load(a, nl.float8_e4m3), load(b, nl.float8_e4m3fn)
        ps = nl.ndarray((64, 64), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(ps, at, bt)  # BAD

    expect_error(kernel, _ab(k=32, m=64, n=64), r"mix float8_e4m3 \(legacy\) and float8_e4m3fn")


def test_error_e4m3fn_before_trn3():
    def kernel(a, b):
        at, bt = load(a, nl.float8_e4m3fn), load(b, nl.float8_e4m3fn)
        ps = nl.ndarray((64, 64), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(ps, at, bt)  # BAD

    expect_error(
        kernel, _ab(k=32, m=64, n=64), r"dtype float8_e4m3fn; allowed on trn2", chip="trn2"
    )


def test_error_bf16_dst_before_trn3():
    def kernel(a, b):
        at, bt = load(a, nl.bfloat16), load(b, nl.bfloat16)
        ps = nl.ndarray((64, 64), nl.bfloat16, buffer=nl.psum)
        nisa.nc_matmul(ps, at, bt)  # BAD

    expect_error(
        kernel, _ab(k=32, m=64, n=64), r"nc_matmul dst dtype must be float32 on gen3", chip="trn2"
    )


def test_error_dst_crosses_psum_bank_on_trn2():
    def kernel(a, b):
        at, bt = load(a), load(b)
        ps = nl.ndarray((64, 1024), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(ps[:, 256:768], at, bt)  # BAD

    expect_error(kernel, _ab(k=32, m=64, n=512), r"crossing a 2048-byte bank boundary", chip="trn2")


def test_error_tile_position_without_tile_size():
    def kernel(a, b):
        at, bt = load(a), load(b)
        ps = nl.ndarray((64, 64), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(ps, at, bt, tile_position=(0, 0))  # BAD

    expect_error(kernel, _ab(k=32, m=64, n=64), r"set both tile_position and tile_size")


def test_error_32_tiles_on_trn1():
    def kernel(a, b):
        at, bt = load(a), load(b)
        ps = nl.ndarray((32, 64), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(ps, at, bt, tile_position=(0, 0), tile_size=(32, 32))  # BAD

    expect_error(
        kernel,
        _ab(k=32, m=32, n=64),
        r"row size 32 is not a PE tile size; allowed "
        r"on trn1: 64, 128",
        chip="trn1",
    )


def test_error_tile_position_not_a_multiple_of_size():
    def kernel(a, b):
        at, bt = load(a), load(b)
        ps = nl.ndarray((32, 64), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(ps, at, bt, tile_position=(32, 0), tile_size=(64, 128))  # BAD

    expect_error(kernel, _ab(k=32, m=32, n=64), r"start row must be a multiple of the row size")


def test_error_stationary_larger_than_tile():
    def kernel(a, b):
        at, bt = load(a), load(b)
        ps = nl.ndarray((64, 64), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(ps, at, bt, tile_position=(0, 0), tile_size=(32, 32))  # BAD

    expect_error(kernel, _ab(k=32, m=64, n=64), r"free size 64 but the column tile has 32")


def test_error_column_tile_result_partitions():
    def kernel(a, b):
        at, bt = load(a), load(b)
        ps = nl.ndarray((128, 64), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(ps[0:32], at, bt, tile_position=(0, 64), tile_size=(32, 32))  # BAD

    expect_error(kernel, _ab(k=32, m=32, n=64), r"results land in PSUM partitions \[64, 96\)")


def test_error_double_row_on_trn1():
    def kernel(a, b):
        at, bt = load(a), load(b)
        ps = nl.ndarray((16, 32), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(ps, at, bt, perf_mode=nisa.matmul_perf_mode.double_row)  # BAD

    a, b = (
        np.zeros((32, 2, 16), ml_dtypes.float8_e4m3),
        np.zeros((32, 2, 32), ml_dtypes.float8_e4m3),
    )
    expect_error(kernel, (a, b), r"perf_mode='double_row' is not available on trn1", chip="trn1")


def test_error_double_row_needs_fp8():
    def kernel(a, b):
        at, bt = load(a), load(b)
        ps = nl.ndarray((16, 32), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(ps, at, bt, perf_mode=nisa.matmul_perf_mode.double_row)  # BAD

    a, b = np.zeros((32, 2, 16), ml_dtypes.bfloat16), np.zeros((32, 2, 32), ml_dtypes.bfloat16)
    expect_error(
        kernel,
        (a, b),
        r"dtype bfloat16; allowed with perf_mode=double_row on trn2: "
        r"float8_e4m3, float8_e5m2$",
        chip="trn2",
    )


def test_error_double_row_layout():
    def kernel(a, b):
        at, bt = load(a), load(b)
        ps = nl.ndarray((16, 48), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(ps, at, bt, perf_mode=nisa.matmul_perf_mode.double_row)  # BAD

    a, b = (
        np.zeros((32, 2, 16), ml_dtypes.float8_e5m2),
        np.zeros((32, 3, 32), ml_dtypes.float8_e5m2),
    )
    expect_error(kernel, (a, b), r"operand 'moving' has shape \[32, 3, 32\]")


def test_error_double_row_with_column_tiling():
    def kernel(a, b):
        at, bt = load(a), load(b)
        ps = nl.ndarray((16, 32), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(  # BAD
            ps,
            at,
            bt,
            tile_position=(0, 0),
            tile_size=(128, 64),
            perf_mode=nisa.matmul_perf_mode.double_row,
        )

    a, b = (
        np.zeros((32, 2, 16), ml_dtypes.float8_e5m2),
        np.zeros((32, 2, 32), ml_dtypes.float8_e5m2),
    )
    expect_error(kernel, (a, b), r"double_row cannot be combined with column tiling")


def test_error_transpose_mode_dst_dtype():
    def kernel(x, ident):
        xt, it = load(x), load(ident)
        ps = nl.ndarray((16, 32), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(ps, xt, it, is_transpose=True)  # BAD

    x, ident = np.zeros((32, 16), ml_dtypes.bfloat16), np.eye(32, dtype=ml_dtypes.bfloat16)
    expect_error(
        kernel,
        (x, ident),
        r"transpose mode writes the input bits: dst dtype must be "
        r"bfloat16",
        chip="trn2",
    )


def test_error_transpose_mode_cannot_accumulate():
    def kernel(x, ident):
        xt, it = load(x), load(ident)
        ps = nl.ndarray((16, 32), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(ps, xt, it, is_transpose=True, accumulate=True)  # BAD

    x, ident = np.zeros((32, 16), np.float32), np.eye(32, dtype=np.float32)
    expect_error(
        kernel,
        (x, ident),
        r"accumulate=True with is_transpose=True is not simulated",
        exc_type=UnsupportedError,
    )


def test_error_nc_transpose_dtype_and_size():
    def dtype_kernel(x):
        xt = load(x)
        ps = nl.ndarray((16, 32), nl.float32, buffer=nl.psum)
        nisa.nc_transpose(ps, xt)  # BAD

    expect_error(
        dtype_kernel,
        (np.zeros((32, 16), ml_dtypes.bfloat16),),
        r"dst has dtype float32 but data has bfloat16",
    )

    def size_kernel(x):
        xt = load(x)
        out = nl.ndarray((64, 64), nl.float32, buffer=nl.sbuf)
        nisa.nc_transpose(out, xt)  # BAD

    expect_error(
        size_kernel,
        (np.zeros((64, 64), np.float32),),
        r"data is \[64, 64\] on the vector engine; at most \[32, 32\]; the Tensor "
        r"Engine \(up to 128x128\) reads SBUF and writes PSUM",
    )

    def shape_kernel(x):
        xt = load(x)
        ps = nl.ndarray((32, 16), nl.float32, buffer=nl.psum)
        nisa.nc_transpose(ps, xt, engine=nisa.engine.tensor)  # BAD

    expect_error(
        shape_kernel,
        (np.zeros((32, 16), np.float32),),
        r"dst has 32 partitions x 16 elements .*the result is \[16, 32\]",
    )


def _mx_inputs(p=64, m=8, n=16):
    return (
        np.zeros((p, m), np.uint32),
        np.full((p, m), 127, np.uint8),
        np.zeros((p, n), np.uint32),
        np.full((p, n), 127, np.uint8),
    )


def _mx_error_kernel(line_kind):
    def kernel(qs, ss, qm, sm):
        a = nl.ndarray(qs.shape, nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        c = nl.ndarray(qm.shape, nl.float8_e5m2_x4, buffer=nl.sbuf)
        _raw_copy(a, qs)
        _raw_copy(c, qm)
        b, d = load(ss), load(sm)
        ps = nl.ndarray((qs.shape[1], qm.shape[1]), nl.float32, buffer=nl.psum)
        if line_kind == "tile":
            nisa.nc_matmul_mx(ps, a, c, b, d, tile_position=(0, 0), tile_size=(64, 64))  # BAD
        elif line_kind == "scale":
            nisa.nc_matmul_mx(ps, a, c, b[0:32], d)  # BAD
        else:
            nisa.nc_matmul_mx(ps, a, c, b, d)  # BAD

    return kernel


def test_error_matmul_mx_rules():
    expect_error(
        _mx_error_kernel("plain"),
        _mx_inputs(),
        r"nc_matmul_mx: not available on "
        r"trn2 \(NeuronCore-v3\); needs NeuronCore-v4",
        chip="trn2",
    )
    expect_error(
        _mx_error_kernel("plain"),
        _mx_inputs(p=48),
        r"stationary and moving have 48 "
        r"partitions; a multiple of 32",
    )
    expect_error(
        _mx_error_kernel("plain"),
        _mx_inputs(m=7),
        r"operand 'stationary' has free "
        r"size 7; even and at most 128",
    )
    expect_error(
        _mx_error_kernel("plain"),
        _mx_inputs(n=640),
        r"operand 'moving' has free size"
        r" 640; at most 512 x4 elements for a float32 dst",
    )
    expect_error(
        _mx_error_kernel("scale"),
        _mx_inputs(),
        r"operand 'stationary_scale' has 32 "
        r"partitions for 64 data partitions; a scale view spans 64 partitions",
    )
    expect_error(
        _mx_error_kernel("tile"),
        _mx_inputs(),
        r"only row tiling: column size must be"
        r" 128",
    )


def test_error_matmul_mx_data_dtype():
    def kernel(a, b):
        at, bt = load(a), load(b)
        ps = nl.ndarray((8, 16), nl.float32, buffer=nl.psum)
        nisa.nc_matmul_mx(ps, at, bt, at, bt)  # BAD

    expect_error(
        kernel,
        (np.zeros((32, 8), ml_dtypes.bfloat16), np.zeros((32, 16), ml_dtypes.bfloat16)),
        r"operand 'stationary' has dtype bfloat16; allowed: float8_e5m2_x4",
    )


def test_error_quantize_mx_rules():
    def src_dtype(x):
        xs = load(x)
        q = nl.ndarray((32, 4), nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        s = nl.ndarray((4, 4), nl.uint8, buffer=nl.sbuf)
        nisa.quantize_mx(dst=q, src=xs, dst_scale=s)  # BAD

    expect_error(
        src_dtype,
        (np.zeros((32, 16), np.float32),),
        r"src has dtype float32; allowed: bfloat16, float16",
    )

    def dst_shape(x):
        xs = load(x)
        q = nl.ndarray((32, 16), nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        s = nl.ndarray((4, 16), nl.uint8, buffer=nl.sbuf)
        nisa.quantize_mx(dst=q, src=xs, dst_scale=s)  # BAD

    expect_error(
        dst_shape,
        (np.zeros((32, 16), ml_dtypes.bfloat16),),
        r"dst is \[32, 16\] x4 for a \[32, 16\] src; dst is \[32, 4\]",
    )

    def quadrant(x):
        xs = load(x)
        q = nl.ndarray((32, 4), nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        s = nl.ndarray((64, 4), nl.uint8, buffer=nl.sbuf)
        nisa.quantize_mx(dst=q, src=xs, dst_scale=s[32:36])  # BAD

    expect_error(
        quadrant,
        (np.zeros((32, 16), ml_dtypes.bfloat16),),
        r"dst and dst_scale must sit in the same quadrant",
    )

    def free_size(x):
        xs = load(x)
        q = nl.ndarray((32, 4), nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        s = nl.ndarray((4, 4), nl.uint8, buffer=nl.sbuf)
        nisa.quantize_mx(dst=q, src=xs[:, 0:14], dst_scale=s)  # BAD

    expect_error(
        free_size,
        (np.zeros((32, 16), ml_dtypes.bfloat16),),
        r"src has free size 14; a multiple of 4",
    )


def test_no_warning_for_a_clean_accumulation_group(rng):
    a, b = _rand(rng, (128, 64)), _rand(rng, (128, 256))
    with warnings.catch_warnings():
        warnings.simplefilter("error", SimulationWarning)
        run(_k_tiles_kernel((False, True, True, True)), a, b)
