"""FP8 quantization: per-row dynamic quantize/dequantize, a scaled fp8 matmul, and an MXFP8
matmul (trn3), with their references.

Layer: kernel library (trnsim.kernels); written against the public NKI API only.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from trnsim.nki import isa as nisa
from trnsim.nki import jit
from trnsim.nki import language as nl

from ._common import fail, prefetched_row_blocks, row_block, row_group
from .matmul import P_MAX, TILE_M, TILE_N, blocked_matmul, copy_out

FP8 = "float8_e4m3"  # Neuron's legacy e4m3 (IEEE-style, has inf): largest finite value 240
FP8_MAX = 240.0  # |x| / scale lands in [0, FP8_MAX]: the full fp8 range, no overflow
AMAX_FLOOR = 1e-30  # an all-zero row gets a tiny scale instead of a division by zero
SBUF_SHARE = 0.5  # share of usable SBUF for the row blocks in flight and their temporaries
FLOAT_IN = ("bfloat16", "float16", "float32")
MX_K = 512  # contraction per nc_matmul_mx: 128 partitions x 4 values packed in an x4 element
MX_PACK = 4  # values per x4 element (float8_e4m3fn_x4)
MX_BLOCK = 32  # values per MX scale: 8 partitions x 4 packed values
MX_EMAX = 8  # largest binade of float8_e4m3fn (448 = 1.75 * 2^8)
MX_BLOCK_N = 2048  # resident quantized rhs columns per block (8 KiB bf16 staging per K tile)
MX_BLOCK_M = 1024  # streamed lhsT columns per block: 2 KiB bf16 runs per DMA row
MX_SBUF_SHARE = 0.8  # share of usable SBUF for matmul_mx's blocks and staging


def _scale_rows(dst, src, factor, turn: int) -> None:
    """dst = src * factor (a per-row [128, 1] scalar), cast to dst's dtype, on VectorE and
    ScalarE by turns so that neither engine carries every full pass."""
    if turn % 2 == 0:
        nisa.tensor_scalar(dst=dst, data=src, op0=nl.multiply, operand0=factor)
    else:
        nisa.activation(dst=dst, op=nl.copy, data=src, scale=factor)


@jit
def quantize_fp8(x):
    """Per-row dynamic FP8 quantization: ``scale = max|x_row| / 240``, ``xq = x / scale``.

    G rows per partition per block (>= 2 KiB DMAs; block b+1 is loaded while block b is
    computed). ScalarE takes |x|; VectorE reduces the row maxima of the block in one
    tensor_reduce, turns them into scales (floor, then multiply by 1/240, one tensor_scalar)
    and their reciprocals; each row is then scaled and cast to float8_e4m3 by one
    instruction writing the fp8 tile (VectorE and ScalarE by turns).

    Dimensions:
        N: rows, multiple of 128.  D: quantized axis.

    Args:
        x: [N, D] HBM tensor, bfloat16, float16 or float32.

    Returns:
        (xq, scale): xq [N, D] float8_e4m3, scale [N, 1] float32, with x ~= xq * scale.

    Notes:
        float8_e4m3 is Neuron's e4m3 with infinities (largest finite 240); the row maximum
        maps to exactly +-240. All-zero rows get scale AMAX_FLOOR / 240 and xq = 0.
    """
    if len(x.shape) != 2 or x.dtype not in FLOAT_IN:
        fail(
            f"quantize_fp8: x must be a 2-D [N, D] tensor of {', '.join(FLOAT_IN)}; got "
            f"shape {list(x.shape)}, dtype {x.dtype}"
        )
    n, d = x.shape
    g = row_group(n, d, x.dtype.itemsize, d * (x.dtype.itemsize + 5), SBUF_SHARE, "quantize_fp8")
    xq = nl.ndarray((n, d), dtype=FP8, buffer=nl.shared_hbm, name="xq")
    scale = nl.ndarray((n, 1), dtype=nl.float32, buffer=nl.shared_hbm, name="x_scale")
    for b, (xt,) in prefetched_row_blocks(g, "x_blk", x):
        ax = nl.ndarray((P_MAX, g, d), dtype=nl.float32, buffer=nl.sbuf, name="abs_x")
        nisa.activation(dst=ax, op=nl.abs, data=xt)
        amax = nl.ndarray((P_MAX, g), dtype=nl.float32, buffer=nl.sbuf, name="amax")
        nisa.tensor_reduce(dst=amax, op=nl.maximum, data=ax, axis=2)
        sc = nl.ndarray((P_MAX, g), dtype=nl.float32, buffer=nl.sbuf, name="scale")
        nisa.tensor_scalar(
            dst=sc,
            data=amax,
            op0=nl.maximum,
            operand0=AMAX_FLOOR,
            op1=nl.multiply,
            operand1=1.0 / FP8_MAX,
        )
        inv = nl.ndarray((P_MAX, g), dtype=nl.float32, buffer=nl.sbuf, name="inv_scale")
        nisa.reciprocal(dst=inv, data=sc)
        q = nl.ndarray((P_MAX, g, d), dtype=FP8, buffer=nl.sbuf, name="xq_blk")
        for j in nl.affine_range(g):
            _scale_rows(q[:, j, :], xt[:, j, :], inv[:, j : j + 1], b * g + j)
        nisa.dma_copy(dst=row_block(xq, b, g), src=q)
        nisa.dma_copy(dst=row_block(scale, b, g), src=sc.reshape((P_MAX, g, 1)))
    return xq, scale


@jit
def dequantize_fp8(xq, scale, dtype=nl.bfloat16):
    """``x = xq * scale`` per row, cast to ``dtype``: one multiply per row tile, on VectorE and
    ScalarE by turns, G rows per partition per block (>= 2 KiB DMAs, next block prefetched).

    Dimensions:
        N: rows, multiple of 128.  D: quantized axis.

    Args:
        xq: [N, D] HBM tensor, float8_e4m3 (or any float dtype).
        scale: [N, 1] float32 HBM tensor.
        dtype: output dtype (default bfloat16).

    Returns:
        [N, D] shared-HBM tensor of ``dtype``.
    """
    if len(xq.shape) != 2:
        fail(f"dequantize_fp8: xq must be 2-D [N, D], got shape {list(xq.shape)}")
    n, d = xq.shape
    if tuple(scale.shape) != (n, 1):
        fail(f"dequantize_fp8: scale must have shape [N, 1]=[{n}, 1], got {list(scale.shape)}")
    per_row = d * (xq.dtype.itemsize + 4)  # input, output (at most 4 bytes)
    g = row_group(n, d, xq.dtype.itemsize, per_row, SBUF_SHARE, "dequantize_fp8")
    out = nl.ndarray((n, d), dtype=dtype, buffer=nl.shared_hbm, name="x_dequant")
    for b, (qt, sc) in prefetched_row_blocks(g, "xq_blk", xq, scale):
        yt = nl.ndarray((P_MAX, g, d), dtype=dtype, buffer=nl.sbuf, name="x_blk")
        for j in nl.affine_range(g):
            _scale_rows(yt[:, j, :], qt[:, j, :], sc[:, j, :], b * g + j)
        nisa.dma_copy(dst=row_block(out, b, g), src=yt)
    return out


@jit
def matmul_fp8(lhsT_q, rhs_q, lhs_scale, rhs_scale):
    """Scaled FP8 matmul: ``out[m, n] = (lhsT_q.T @ rhs_q)[m, n] * lhs_scale[m] * rhs_scale[n]``.

    The loop nest of ``trnsim.kernels.matmul.matmul`` (resident rhs block, streamed lhsT,
    K accumulated in PSUM) on fp8 operands; the PSUM evacuation applies both scales and
    the cast to bf16 in one VectorE scalar_tensor_tensor: the row scale is a per-partition
    scalar, the column scales a row broadcast to all partitions once by DMA.

    Dimensions:
        K, M: multiples of 128.  N: multiple of 512.

    Args:
        lhsT_q: [K, M] float8_e4m3 HBM tensor: A^T, with A quantized per row (quantize_fp8
            of A [M, K], transposed).
        rhs_q: [K, N] float8_e4m3 HBM tensor: B, quantized per column (quantize_fp8 of B^T).
        lhs_scale: [M, 1] float32: the row scales of A.
        rhs_scale: [N, 1] float32: the column scales of B.

    Returns:
        [M, N] shared-HBM tensor, bfloat16.
    """
    if len(lhsT_q.shape) != 2 or len(rhs_q.shape) != 2:
        fail(
            f"matmul_fp8: lhsT_q and rhs_q must be 2-D, got {list(lhsT_q.shape)} and "
            f"{list(rhs_q.shape)}"
        )
    (k, m), (k2, n) = lhsT_q.shape, rhs_q.shape
    if k != k2 or k % P_MAX or m % TILE_M or n % TILE_N or not (k and m and n):
        fail(
            f"matmul_fp8: lhsT_q is [K={k}, M={m}], rhs_q [K={k2}, N={n}]; both K must "
            f"agree, K and M be multiples of 128 and N of 512"
        )
    if lhsT_q.dtype != FP8 or rhs_q.dtype != FP8:
        fail(f"matmul_fp8: operands are {lhsT_q.dtype} and {rhs_q.dtype}; both must be {FP8}")
    if tuple(lhs_scale.shape) != (m, 1) or tuple(rhs_scale.shape) != (n, 1):
        fail(
            f"matmul_fp8: scales must be lhs_scale [M, 1]=[{m}, 1] and rhs_scale [N, 1]="
            f"[{n}, 1]; got {list(lhs_scale.shape)} and {list(rhs_scale.shape)}"
        )
    out = nl.ndarray((m, n), dtype=nl.bfloat16, buffer=nl.shared_hbm, name="matmul_fp8_out")
    # Row scales: row i*128 + p at partition p, column i. Column scales on every partition.
    row_sc = nl.ndarray((P_MAX, m // P_MAX), dtype=nl.float32, buffer=nl.sbuf, name="row_sc")
    nisa.dma_copy(dst=row_sc, src=lhs_scale.reshape((m // P_MAX, P_MAX)).permute((1, 0)))
    col_sc = nl.ndarray((P_MAX, n), dtype=nl.float32, buffer=nl.sbuf, name="col_sc")
    nisa.dma_copy(dst=col_sc, src=rhs_scale.reshape((1, n)).broadcast(0, P_MAX))

    def scale_out(dst, acc, row0: int, col0: int, engine) -> None:
        w = dst.shape[1]
        nisa.scalar_tensor_tensor(
            dst=dst,
            data=acc,
            op0=nl.multiply,
            operand0=row_sc[:, row0 // P_MAX : row0 // P_MAX + 1],
            op1=nl.multiply,
            operand1=col_sc[:, col0 : col0 + w],
        )

    blocked_matmul(lhsT_q, rhs_q, out, scale_out)
    return out


def _mx_stage(src, k0: int, c0: int, width: int, name: str):
    """bf16 rows k0..k0+511 of src, columns c0..c0+width, as [128, 4, width]: row k0+128i+p
    at partition p, slot i (4 contiguous runs per partition)."""
    t = nl.ndarray((P_MAX, MX_PACK, width), dtype=src.dtype, buffer=nl.sbuf, name=name)
    rows = src[k0 : k0 + MX_K, c0 : c0 + width].reshape((MX_PACK, P_MAX, width)).permute((1, 0, 2))
    nisa.dma_copy(dst=t, src=rows)
    return t


def _mx_blocks(k_tiles: int, m: int, n: int) -> tuple[int, int]:
    """(block_n, block_m) for matmul_mx: halved from MX_BLOCK_N / MX_BLOCK_M until the
    quantized rhs block, two quantized lhsT blocks and their bf16 staging fit in SBUF."""
    usable = nl.tile_size.total_available_sbuf_size * MX_SBUF_SHARE
    bn, bm = min(n, MX_BLOCK_N), min(m, MX_BLOCK_M)

    def need(bn: int, bm: int) -> int:  # x4 data (4 B) + scale (1 B) per packed element
        return k_tiles * (bn + 2 * bm) * 5 + 2 * MX_PACK * 2 * max(bn, bm)

    while need(bn, bm) > usable and (bn > TILE_N or bm > TILE_M):
        if bn > TILE_N and (bn >= 4 * bm or bm <= TILE_M):
            bn = max(TILE_N, bn // 2 // TILE_N * TILE_N)
        else:
            bm = max(TILE_M, bm // 2 // TILE_M * TILE_M)
    if need(bn, bm) > usable:
        fail(
            f"matmul_mx: K={k_tiles * MX_K} is too large: even a K x {TILE_N} quantized rhs "
            f"block needs {need(bn, bm)} bytes per partition, {int(usable)} fit; split K"
        )
    return bn, bm


@jit
def matmul_mx(lhsT, rhs):
    """MXFP8 matmul on trn3: quantize both operands on chip (quantize_mx), multiply with
    nc_matmul_mx, ``out ~= lhsT.T @ rhs`` in bf16.

    The rhs block (K x up to 2048 columns) is quantized once and stays resident; lhsT
    streams in blocks of up to 1024 columns, quantized as it arrives (both narrowed for
    large K to fit SBUF). Each K tile of 512
    rows is staged as [128, 4, w] (row k0 + 128*i + p at partition p, slot i) and quantized
    from the strided view [128, w, 4], so the 4 values packed in one x4 element are K rows
    k0 + p, k0 + 128 + p, ... of the same column; both operands use the same mapping, so
    the contraction pairs them correctly. Each 128 x 512 output tile accumulates K/512
    nc_matmul_mx instructions in one PSUM bank.

    Dimensions:
        K: multiple of 512.  M: multiple of 128.  N: multiple of 512.

    Args:
        lhsT: [K, M] HBM tensor, bfloat16 or float16.
        rhs: [K, N] HBM tensor, same dtype.

    Returns:
        [M, N] shared-HBM tensor, bfloat16.

    Notes:
        NeuronCore-v4 only (quantize_mx / nc_matmul_mx). MX scale groups are 32 values:
        8 partitions x 4 packed values, i.e. K rows {k0 + 128*i + p : i < 4, p in 8 rows}.
    """
    if nisa.get_nc_version() < nisa.nc_version.gen4:
        fail("matmul_mx: quantize_mx and nc_matmul_mx need NeuronCore-v4 (trn3)")
    if len(lhsT.shape) != 2 or len(rhs.shape) != 2:
        fail(f"matmul_mx: lhsT and rhs must be 2-D, got {list(lhsT.shape)} and {list(rhs.shape)}")
    (k, m), (k2, n) = lhsT.shape, rhs.shape
    if k != k2 or k % MX_K or m % TILE_M or n % TILE_N or not (k and m and n):
        fail(
            f"matmul_mx: lhsT is [K={k}, M={m}], rhs [K={k2}, N={n}]; both K must agree, "
            f"K be a multiple of {MX_K}, M of {TILE_M} and N of {TILE_N}"
        )
    if lhsT.dtype != rhs.dtype or lhsT.dtype not in ("bfloat16", "float16"):
        fail(
            f"matmul_mx: dtypes are {lhsT.dtype} and {rhs.dtype}; both must be bfloat16 or "
            "float16 (quantize_mx inputs)"
        )
    k_tiles = k // MX_K
    block_n, block_m = _mx_blocks(k_tiles, m, n)
    out = nl.ndarray((m, n), dtype=nl.bfloat16, buffer=nl.shared_hbm, name="matmul_mx_out")
    for nb in nl.affine_range(-(-n // block_n)):
        n0 = nb * block_n
        bn = min(block_n, n - n0)
        rq = nl.ndarray(
            (P_MAX, k_tiles, bn), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf, name="rhs_mx"
        )
        rs = nl.ndarray((P_MAX, k_tiles, bn), dtype=nl.uint8, buffer=nl.sbuf, name="rhs_scale")
        for kt in nl.affine_range(k_tiles):
            stage = _mx_stage(rhs, kt * MX_K, n0, bn, "rhs_stage")
            nisa.quantize_mx(dst=rq[:, kt, :], src=stage.permute((0, 2, 1)), dst_scale=rs[:, kt, :])
        for mb in nl.affine_range(-(-m // block_m)):
            m0 = mb * block_m
            bm = min(block_m, m - m0)
            lq = nl.ndarray(
                (P_MAX, k_tiles, bm), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf, name="lhsT_mx"
            )
            ls = nl.ndarray((P_MAX, k_tiles, bm), dtype=nl.uint8, buffer=nl.sbuf, name="lhsT_scale")
            for kt in nl.affine_range(k_tiles):
                stage = _mx_stage(lhsT, kt * MX_K, m0, bm, "lhsT_stage")
                nisa.quantize_mx(
                    dst=lq[:, kt, :], src=stage.permute((0, 2, 1)), dst_scale=ls[:, kt, :]
                )
            for mt in nl.affine_range(bm // TILE_M):
                c = slice(mt * TILE_M, (mt + 1) * TILE_M)
                strip = nl.ndarray(
                    (TILE_M, bn), dtype=nl.bfloat16, buffer=nl.sbuf, name="out_strip"
                )
                for nt in nl.affine_range(bn // TILE_N):
                    cols = slice(nt * TILE_N, (nt + 1) * TILE_N)
                    acc = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum, name="acc")
                    for kt in nl.affine_range(k_tiles):
                        nisa.nc_matmul_mx(
                            dst=acc,
                            stationary=lq[:, kt, c],
                            moving=rq[:, kt, cols],
                            stationary_scale=ls[:, kt, c],
                            moving_scale=rs[:, kt, cols],
                            accumulate=kt > 0,
                        )
                    engine = nisa.engine.vector if nt % 2 == 0 else nisa.engine.scalar
                    copy_out(strip[:, cols], acc, engine)
                r0 = m0 + mt * TILE_M
                nisa.dma_copy(dst=out[r0 : r0 + TILE_M, n0 : n0 + bn], src=strip)
        # The block's last matmul is issued: release it before the next one is allocated,
        # so two rhs blocks never hold SBUF at once.
        del rq, rs
    return out


# ---------------------------------------------------------------- references


def quantize_fp8_ref(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(xq float8_e4m3, scale float32 [N, 1]) computed in float64, then rounded once."""
    x64 = np.asarray(x, dtype=np.float64)
    scale = np.maximum(np.abs(x64).max(axis=1, keepdims=True), AMAX_FLOOR) / FP8_MAX
    return (x64 / scale).astype(ml_dtypes.float8_e4m3), scale.astype(np.float32)


def dequantize_fp8_ref(xq: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """xq * scale in float64."""
    return np.asarray(xq, dtype=np.float64) * np.asarray(scale, dtype=np.float64)


def matmul_fp8_ref(
    lhsT_q: np.ndarray, rhs_q: np.ndarray, lhs_scale: np.ndarray, rhs_scale: np.ndarray
) -> np.ndarray:
    """(lhsT_q.T @ rhs_q) * lhs_scale * rhs_scale.T in float64."""
    prod = np.asarray(lhsT_q, dtype=np.float64).T @ np.asarray(rhs_q, dtype=np.float64)
    return prod * np.asarray(lhs_scale, np.float64) * np.asarray(rhs_scale, np.float64).T


def mx_dequantized_ref(a: np.ndarray) -> np.ndarray:
    """What matmul_mx multiplies: a [K, C] quantized to MXFP8 in the kernel's grouping
    (K rows {k0 + 128*i + p : i < 4, p in one 8-row group} per column share one scale
    2^(floor(log2 amax) - 7), all-zero groups 2^-127) and decoded again, in float64."""
    a64 = np.asarray(a, dtype=np.float64)
    k, c = a64.shape
    rows = MX_BLOCK // MX_PACK  # partitions per scale group
    g = a64.reshape(k // MX_K, MX_PACK, P_MAX // rows, rows, c)  # [kt, i, group, row, col]
    amax = np.abs(g).max(axis=(1, 3), keepdims=True)
    with np.errstate(divide="ignore"):
        exp = np.where(
            amax > 0, np.floor(np.log2(np.where(amax > 0, amax, 1.0))) - (MX_EMAX - 1), -127.0
        )
    x = np.ldexp(1.0, np.maximum(exp, -127).astype(np.int64))
    q = (g / x).astype(ml_dtypes.float8_e4m3fn).astype(np.float64)
    return (q * x).reshape(k, c)


def matmul_mx_ref(lhsT: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """The product of the MX-quantized operands, in float64 (no output rounding)."""
    return mx_dequantized_ref(lhsT).T @ mx_dequantized_ref(rhs)
