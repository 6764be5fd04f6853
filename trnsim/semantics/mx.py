"""Semantics of the NC-v4 microscaling (MX) instructions: nc_matmul_mx (Tensor Engine) and its
inverse quantize_mx (Vector Engine). Pure numpy; knows nothing about time.

Layout (nki-api.md §7.1, Trainium3 arch guide "Quad-MXFP8/MXFP4 Matmul"). A data tensor
[P, F] of x4 words holds 4 values per element (dtypes.pack_x4: value j in bits [8j, 8j+8), or
[4j, 4j+4) for fp4); the contraction runs over the P partitions and the 4 values of a word,
so K = 4P <= 512. A scale group is 32 values: 8 partitions x the 4 values of one word, one
E8M0 scale (2^(code-127), code 255 = NaN) per group. Scales sit in SBUF quadrant by quadrant:
the 32 partitions of data quadrant q produce 4 scale rows, at scale-view rows 32q + 0..3, one
column per data column. A 32-partition data tile uses a 4-partition scale view (a 32-partition
one is accepted too, rows 0..3 used); larger tiles use a scale view as tall as the data.
"""

from __future__ import annotations

import numpy as np

from trnsim import dtypes as dt
from trnsim.memory import View
from trnsim.semantics import semantics
from trnsim.semantics._tensor_rules import (
    check_dst_shape,
    check_tiling,
    marks_psum,
    write_bits,
    write_psum_result,
)
from trnsim.spec import elems_of, fail, partitions_of, start_partition

MX_DATA = ("float8_e5m2_x4", "float8_e4m3fn_x4", "float4_e2m1fn_x4")
MX_QUANT = ("float8_e5m2_x4", "float8_e4m3fn_x4")  # quantize_mx targets (MXFP8 only)
SCALE_DTYPES = ("uint8", "float8_e8m0fnu")
# Largest power-of-two exponent of the element type (OCP "emax"): e4m3fn 8 (448), e5m2 15.
EMAX = {"float8_e4m3fn": 8, "float8_e5m2": 15}
SCALE_MIN_EXP = -127  # E8M0 code 0


def scale_rows(p: int) -> np.ndarray:
    """Scale-view row of each of p data partitions: 4 rows per 32-partition quadrant."""
    i = np.arange(p)
    return 32 * (i // 32) + (i % 32) // 8


def _check_gen4(instr: str, chip) -> None:
    if chip.nc_version < 4:
        fail(
            instr,
            f"not available on {chip.name} (NeuronCore-v{chip.nc_version})",
            "needs NeuronCore-v4 (trn3)",
        )


def _check_scale(instr: str, name: str, scale: View, data: View) -> None:
    if scale.dtype.name not in SCALE_DTYPES:
        fail(
            instr,
            f"operand '{name}' has dtype {scale.dtype.name}",
            f"allowed: {', '.join(SCALE_DTYPES)}",
        )
    p, sp = partitions_of(data), partitions_of(scale)
    ok = (4, 32) if p == 32 else (p,)
    if sp not in ok:
        fail(
            instr,
            f"operand '{name}' has {sp} partitions for {p} data partitions",
            f"a scale view spans {' or '.join(map(str, ok))} partitions "
            "(4 scale rows per 32-partition quadrant)",
        )
    if elems_of(scale) != elems_of(data):
        fail(
            instr,
            f"operand '{name}' has {elems_of(scale)} elements per partition but the "
            f"data has {elems_of(data)}",
            "one scale per x4 data element column",
        )


def check_nc_matmul_mx(
    *, chip, engine, attrs, dst, stationary, moving, stationary_scale, moving_scale, **_
) -> None:
    instr = "nc_matmul_mx"
    _check_gen4(instr, chip)
    for name, t in (("stationary", stationary), ("moving", moving)):
        if t.dtype.name not in MX_DATA:
            fail(
                instr,
                f"operand '{name}' has dtype {t.dtype.name}",
                f"allowed: {', '.join(MX_DATA)}",
            )
    if dst.dtype.name not in ("float32", "bfloat16"):
        fail(instr, f"dst has dtype {dst.dtype.name}", "allowed: float32, bfloat16")
    acc = attrs.get("accumulate")
    if acc not in (None, True, False):
        fail(instr, f"accumulate={acc!r}", "allowed: None (auto), True, False")
    p, m, n = partitions_of(stationary), elems_of(stationary), elems_of(moving)
    if p % 32:
        fail(instr, f"stationary and moving have {p} partitions", "a multiple of 32, at most 128")
    if m % 2 or m > 128:
        fail(instr, f"operand 'stationary' has free size {m}", "even and at most 128")
    # The GA docstring (and the Trainium3 guide's [128, 512] x4 maximum) say 512 fp32 / 1024
    # bf16; nki-api.md §7.1's 4096/8192 is nc_matmul's NC-v4 limit, not this instruction's.
    nmax = 512 if dst.dtype.name == "float32" else 1024
    if n > nmax:
        fail(
            instr,
            f"operand 'moving' has free size {n}",
            f"at most {nmax} x4 elements for a {dst.dtype.name} dst",
        )
    _check_scale(instr, "stationary_scale", stationary_scale, stationary)
    _check_scale(instr, "moving_scale", moving_scale, moving)
    check_tiling(instr, chip, attrs, p, m, dst, row_only=True)
    check_dst_shape(instr, dst, m, n)


def _values(v: View) -> np.ndarray:
    """x4 data as float64 [P, F, 4]."""
    words = v.read().reshape(v.shape[0], -1)
    return dt.unpack_x4(words, v.dtype).astype(np.float64).reshape(*words.shape, 4)


def _scales(scale: View, p: int) -> np.ndarray:
    """Dequantisation factor of each data partition: float64 [P, F]."""
    codes = scale.read().reshape(scale.shape[0], -1).view(np.uint8)[scale_rows(p)]
    out = np.ldexp(1.0, codes.astype(np.int64) - 127)
    out[codes == 255] = np.nan
    return out


@semantics("nc_matmul_mx")
@marks_psum
def nc_matmul_mx(
    core,
    *,
    engine: str,
    dst: View,
    stationary: View,
    moving: View,
    stationary_scale: View,
    moving_scale: View,
    accumulate: bool | None = None,
    **attrs,
) -> None:
    """dst = sum over partitions and x4 lanes of dequantised stationary x moving.

    Products of the decoded values with their power-of-two scales are exact in float64; the
    sum is rounded to fp32 once (see semantics/matmul.py); PSUM rule as nc_matmul.
    """
    p = stationary.shape[0]
    s = _values(stationary) * _scales(stationary_scale, p)[:, :, None]
    m = _values(moving) * _scales(moving_scale, p)[:, :, None]
    s2 = s.transpose(0, 2, 1).reshape(p * 4, -1)
    m2 = m.transpose(0, 2, 1).reshape(p * 4, -1)
    with np.errstate(all="ignore"):
        prod = (s2.T @ m2).astype(np.float32)
    write_psum_result(core, "nc_matmul_mx", dst, prod.reshape(dst.shape), accumulate)


# ---------------------------------------------------------------- quantize_mx


def check_quantize_mx(*, chip, engine, attrs, dst, src, dst_scale, **_) -> None:
    instr = "quantize_mx"
    _check_gen4(instr, chip)
    if src.dtype.name not in ("bfloat16", "float16"):
        fail(instr, f"src has dtype {src.dtype.name}", "allowed: bfloat16, float16")
    if dst.dtype.name not in MX_QUANT:
        fail(instr, f"dst has dtype {dst.dtype.name}", f"allowed: {', '.join(MX_QUANT)}")
    p, f = partitions_of(src), elems_of(src)
    if p % 32:
        fail(instr, f"src has {p} partitions", "a multiple of 32, at most 128")
    if f % 4:
        fail(instr, f"src has free size {f}", "a multiple of 4")
    if partitions_of(dst) != p or elems_of(dst) * 4 != f:
        fail(
            instr,
            f"dst is [{partitions_of(dst)}, {elems_of(dst)}] x4 for a [{p}, {f}] src",
            f"dst is [{p}, {f // 4}] (4 values per x4 element)",
        )
    _check_scale(instr, "dst_scale", dst_scale, dst)
    if start_partition(dst) // 32 != start_partition(dst_scale) // 32:
        fail(
            instr,
            f"dst starts in SBUF quadrant {start_partition(dst) // 32} but dst_scale in "
            f"quadrant {start_partition(dst_scale) // 32}",
            "dst and dst_scale must sit in the same quadrant(s)",
        )


@semantics("quantize_mx")
def quantize_mx(core, *, engine: str, dst: View, src: View, dst_scale: View, **attrs) -> None:
    """Per group of 8 partitions x 4 values: scale X = 2^(floor(log2(amax)) - (emax - 1)) (one
    power of two above the OCP sample algorithm, nki-api.md §7.3), clamped to E8M0's 2^-127
    (all-zero groups too); values / X rounded to nearest even; non-finite amax -> NaN scale."""
    elem = dst.dtype.elem
    p = src.shape[0]
    x = src.read_f32().astype(np.float64).reshape(p, -1, 4)  # [P, F4, 4]
    groups = np.abs(x).reshape(p // 8, 8, x.shape[1], 4)
    with np.errstate(invalid="ignore"):
        amax = groups.max(axis=(1, 3))  # [P/8, F4]; NaN propagates
    finite = np.isfinite(amax)
    _, e = np.frexp(np.where(finite & (amax > 0), amax, 1.0))  # amax = m * 2^e, m in [0.5, 1)
    exp = np.where(finite & (amax > 0), e - EMAX[elem.name], SCALE_MIN_EXP)
    exp = np.maximum(exp, SCALE_MIN_EXP)
    codes = np.where(finite, exp + 127, 255).astype(np.uint8)
    factor = np.repeat(np.where(finite, np.ldexp(1.0, exp), np.nan), 8, axis=0)  # [P, F4]
    with np.errstate(all="ignore"):
        q = dt.cast((x / factor[:, :, None]).astype(np.float32), elem)
    write_bits(dst, dt.pack_x4(q.reshape(p, -1), dst.dtype))
    rows = scale_rows(p)[::8]  # one scale row per group of 8 partitions
    out = dst_scale.array().view(np.uint8)
    out[rows] = codes.reshape(len(rows), *out.shape[1:])
