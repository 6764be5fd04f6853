"""Matrix multiply on the Tensor Engine: a blocked kernel, a naive tiled one, and the reference.

Layer: kernel library (trnsim.kernels); written against the public NKI API only.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from trnsim.nki import isa as nisa
from trnsim.nki import jit
from trnsim.nki import language as nl

from ._common import fail, scalar_copy

P_MAX = 128  # partitions per tile = contraction rows per nc_matmul (pmax)
TILE_M = 128  # stationary free size per nc_matmul (gemm_stationary_fmax)
TILE_N = 512  # moving free size per nc_matmul: 512 fp32 fill one 2 KiB PSUM bank (psum_bank_fmax)
PSUM_GROUP = 4  # PSUM banks accumulated per stationary load: half of the 8 banks, so the next
#                 group fills the other half while this one is copied out
MIN_DMA_BYTES = 2048  # bytes per partition below which a DMA's fixed cost (~2 us) dominates
RHS_SBUF_SHARE = 0.4  # share of usable SBUF for the resident rhs block
LHS_SBUF_SHARE = 0.2  # share of usable SBUF for one streamed lhsT block (two are in flight);
#                       the rest holds output strips (two or three in flight) and scales
MAX_BLOCK_N = 4096  # columns of the resident rhs block: bounds an output strip to 16 KiB fp32
DTYPES = ("bfloat16", "float16", "float32")  # the Tensor Engine pairs fp32 only with fp32


def _check_operands(lhsT, rhs) -> tuple[int, int, int]:
    """(K, M, N) of a valid call; raises ConstraintError naming the bad operand otherwise."""
    if len(lhsT.shape) != 2 or len(rhs.shape) != 2:
        fail(
            f"matmul: lhsT and rhs must be 2-D, got shapes {list(lhsT.shape)} and {list(rhs.shape)}"
        )
    (k, m), (k2, n) = lhsT.shape, rhs.shape
    if k != k2:
        fail(
            f"matmul: contraction sizes differ: lhsT is [K={k}, M={m}], rhs is [K={k2}, "
            f"N={n}]; both must have the same K on axis 0"
        )
    for name, size, unit in (("K", k, P_MAX), ("M", m, TILE_M), ("N", n, TILE_N)):
        if size <= 0 or size % unit:
            fail(
                f"matmul: {name}={size} is not a positive multiple of {unit}; pad the "
                f"operands so that K and M are multiples of 128 and N of 512"
            )
    if lhsT.dtype != rhs.dtype or lhsT.dtype not in DTYPES:
        fail(
            f"matmul: dtypes are lhsT {lhsT.dtype}, rhs {rhs.dtype}; both must be the same "
            f"one of {', '.join(DTYPES)}"
        )
    return k, m, n


def _block_sizes(k: int, m: int, n: int, itemsize: int) -> tuple[int, int]:
    """(BLOCK_M, BLOCK_N): the resident rhs block and the streamed lhsT block widths."""
    usable = nl.tile_size.total_available_sbuf_size  # bytes per partition
    k_tiles = k // P_MAX
    slab = k_tiles * TILE_N * itemsize  # bytes per partition of a K x 512 rhs slab
    if slab > usable * RHS_SBUF_SHARE:
        fail(
            f"matmul: K={k} is too large to keep even one K x {TILE_N} rhs block in SBUF "
            f"({slab} bytes per partition; the budget is {int(usable * RHS_SBUF_SHARE)} of "
            f"{usable}); split K on the host and sum the partial products"
        )
    block_n = min(n, MAX_BLOCK_N, int(usable * RHS_SBUF_SHARE) // slab * TILE_N)
    # Stream lhsT in columns wide enough for >= 2 KiB DMAs, as SBUF allows.
    block_m = max(TILE_M, -(-MIN_DMA_BYTES // itemsize) // TILE_M * TILE_M)
    while block_m > TILE_M and k_tiles * block_m * itemsize > usable * LHS_SBUF_SHARE:
        block_m -= TILE_M
    return min(m, block_m), block_n


@jit
def matmul(lhsT, rhs):
    """Blocked matrix multiply ``out = lhsT.T @ rhs`` with a resident rhs block.

    A block of ``rhs`` (all of K by BLOCK_N columns) stays in SBUF while every ``lhsT``
    column block streams past it. For each 128-row output tile the kernel loads one
    stationary ``lhsT`` tile per K tile and multiplies it against up to four 512-wide
    moving tiles, accumulating over K in four PSUM banks (fp32); the four banks are then
    copied out to SBUF with a cast to the output dtype (alternating Vector and Scalar
    engines) and the 128 x BLOCK_N row strip is stored with one DMA.

    Dimensions:
        K: contraction, multiple of 128 (partitions of both inputs).
        M: rows of the result, multiple of 128.
        N: columns of the result, multiple of 512.

    Args:
        lhsT: [K, M] HBM tensor, bfloat16, float16 or float32 (the left operand, transposed).
        rhs: [K, N] HBM tensor of the same dtype.

    Returns:
        [M, N] shared-HBM tensor of the input dtype.

    Notes:
        BLOCK_N is the widest multiple of 512 (at most 4096) whose K x BLOCK_N rhs block fits
        in 40% of ``nl.tile_size.total_available_sbuf_size``; BLOCK_M is 2 KiB worth of
        columns per partition (1024 bf16 / 512 fp32), narrowed for large K so two lhsT
        blocks fit in another 40%. rhs DMAs move BLOCK_N * itemsize bytes per partition
        (>= 1 KiB), lhsT DMAs BLOCK_M * itemsize (2 KiB unless M or SBUF is smaller).
        K must allow one K x 512 rhs block in 40% of SBUF (K <= 12160 for bf16 on trn3).

    Pseudocode:
        for each rhs block [K, n0:n0+BLOCK_N]:            (resident)
          for each lhsT block [K, m0:m0+BLOCK_M]:         (streamed; the next one is
                                                           loaded before these matmuls)
            for each 128-row tile mt, each group of 4 x 512 columns:
              psum[4 banks] = sum_k lhsT[k, mt].T @ rhs[k, group]
              out_strip[:, group] = cast(psum)
            store out_strip -> out[m rows, n0:n0+BLOCK_N]
    """
    _, m, n = _check_operands(lhsT, rhs)
    out = nl.ndarray((m, n), dtype=lhsT.dtype, buffer=nl.shared_hbm, name="matmul_out")
    blocked_matmul(lhsT, rhs, out, _copy_out)
    return out


def _copy_out(dst, acc, row0: int, col0: int, engine) -> None:
    """PSUM -> SBUF with a cast to dst's dtype, on VectorE or ScalarE."""
    copy_out(dst, acc, engine)


def copy_out(dst, src, engine) -> None:
    """dst = src (with a cast) on `engine` (VectorE or ScalarE)."""
    if engine == nisa.engine.scalar:
        scalar_copy(dst, src)
    else:
        nisa.tensor_copy(dst=dst, src=src, engine=engine)


def _load_block(src, c0: int, width: int, k_tiles: int, name: str):
    """Columns c0..c0+width of a [K, C] HBM operand as [128, K/128, w] in SBUF (K tile kt on
    column kt; w = width clipped to C): one DMA per K tile, w * itemsize bytes per partition."""
    w = min(width, src.shape[1] - c0)
    t = nl.ndarray((P_MAX, k_tiles, w), dtype=src.dtype, buffer=nl.sbuf, name=name)
    for kt in nl.affine_range(k_tiles):
        nisa.dma_copy(dst=t[:, kt, :], src=src[kt * P_MAX : (kt + 1) * P_MAX, c0 : c0 + w])
    return t


def blocked_matmul(lhsT, rhs, out, evacuate: Callable[..., None]) -> None:
    """The loop nest of `matmul`, with the PSUM evacuation left to the caller.

    ``evacuate(dst, acc, row0, col0, engine)`` must write ``dst`` (an SBUF [128, w] slice of
    the output strip, out's dtype) from ``acc`` (the [128, w] fp32 PSUM accumulator) for
    output rows row0..row0+127 and columns col0..col0+w-1, on ``engine``. Shapes must have
    passed the checks of the calling kernel (K, M multiples of 128, N of 512).
    """
    k, m = lhsT.shape
    n = rhs.shape[1]
    dtype = lhsT.dtype
    k_tiles = k // P_MAX
    block_m, block_n = _block_sizes(k, m, n, dtype.itemsize)
    n_nb, n_mb = -(-n // block_n), -(-m // block_m)

    lhs_next = _load_block(lhsT, 0, block_m, k_tiles, "lhsT_blk")
    for nb in nl.affine_range(n_nb):
        n0 = nb * block_n
        bn = min(block_n, n - n0)
        rhs_sb = _load_block(rhs, n0, bn, k_tiles, "rhs_blk")  # resident for every mb
        for mb in nl.affine_range(n_mb):
            m0 = mb * block_m
            bm = min(block_m, m - m0)
            lhs_sb = lhs_next
            # Prefetch: the next lhsT block (block 0 again for the next rhs block) is loaded
            # before this block's matmuls, so its DMAs overlap them rather than queue behind
            # this block's stores. Allocated in the loop body, so it gets a fresh buffer.
            if nb < n_nb - 1 or mb < n_mb - 1:
                nxt = (mb + 1) % n_mb
                lhs_next = _load_block(lhsT, nxt * block_m, block_m, k_tiles, "lhsT_blk")

            for mt in nl.affine_range(bm // TILE_M):
                r0 = m0 + mt * TILE_M
                strip = nl.ndarray((TILE_M, bn), dtype=out.dtype, buffer=nl.sbuf, name="out_strip")
                n_tiles = bn // TILE_N
                for g in nl.affine_range(-(-n_tiles // PSUM_GROUP)):
                    t0 = g * PSUM_GROUP
                    nt = min(PSUM_GROUP, n_tiles - t0)
                    acc = nl.ndarray(
                        (TILE_M, nt, TILE_N), dtype=nl.float32, buffer=nl.psum, name="acc"
                    )
                    for kt in nl.affine_range(k_tiles):
                        stationary = lhs_sb[:, kt, mt * TILE_M : (mt + 1) * TILE_M]
                        for j in nl.affine_range(nt):
                            c0 = (t0 + j) * TILE_N
                            nisa.nc_matmul(
                                dst=acc[:, j, :],
                                stationary=stationary,
                                moving=rhs_sb[:, kt, c0 : c0 + TILE_N],
                                accumulate=kt > 0,
                            )
                    # Alternate the evacuating engine to balance Vector and Scalar.
                    engine = nisa.engine.vector if g % 2 == 0 else nisa.engine.scalar
                    evacuate(
                        strip[:, t0 * TILE_N : (t0 + nt) * TILE_N],
                        acc.reshape((TILE_M, nt * TILE_N)),
                        r0,
                        n0 + t0 * TILE_N,
                        engine,
                    )
                nisa.dma_copy(dst=out[r0 : r0 + TILE_M, n0 : n0 + bn], src=strip)
        # The block's last matmul is issued: release it before the next one is allocated,
        # so two rhs blocks never hold SBUF at once.
        del rhs_sb


@jit
def matmul_naive(lhsT, rhs):
    """The simplest correct tiled matmul ``out = lhsT.T @ rhs``, for comparison.

    For every 128 x 512 output tile: for every K tile, load a [128, 128] lhsT tile and a
    [128, 512] rhs tile, multiply-accumulate into one PSUM bank; then copy out and store.
    Nothing is reused across output tiles, so every input is reloaded M/128 or N/512 times.

    Dimensions:
        K, M: multiples of 128. N: multiple of 512.

    Args:
        lhsT: [K, M] HBM tensor, bfloat16, float16 or float32.
        rhs: [K, N] HBM tensor of the same dtype.

    Returns:
        [M, N] shared-HBM tensor of the input dtype.

    Notes:
        DMAs are 256 B (bf16 lhsT tiles) to 1 KiB per partition: small, on purpose.
    """
    k, m, n = _check_operands(lhsT, rhs)
    dtype = lhsT.dtype
    out = nl.ndarray((m, n), dtype=dtype, buffer=nl.shared_hbm, name="matmul_out")
    for mt in nl.affine_range(m // TILE_M):
        for nt in nl.affine_range(n // TILE_N):
            acc = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum, name="acc")
            for kt in nl.affine_range(k // P_MAX):
                a = nl.ndarray((P_MAX, TILE_M), dtype=dtype, buffer=nl.sbuf, name="lhsT_tile")
                b = nl.ndarray((P_MAX, TILE_N), dtype=dtype, buffer=nl.sbuf, name="rhs_tile")
                nisa.dma_copy(
                    dst=a, src=lhsT[kt * P_MAX : (kt + 1) * P_MAX, mt * TILE_M : (mt + 1) * TILE_M]
                )
                nisa.dma_copy(
                    dst=b, src=rhs[kt * P_MAX : (kt + 1) * P_MAX, nt * TILE_N : (nt + 1) * TILE_N]
                )
                nisa.nc_matmul(dst=acc, stationary=a, moving=b, accumulate=kt > 0)
            res = nl.ndarray((TILE_M, TILE_N), dtype=dtype, buffer=nl.sbuf, name="out_tile")
            nisa.tensor_copy(dst=res, src=acc)
            nisa.dma_copy(
                dst=out[mt * TILE_M : (mt + 1) * TILE_M, nt * TILE_N : (nt + 1) * TILE_N], src=res
            )
    return out


def matmul_ref(lhsT: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """``lhsT.T @ rhs`` in float64 (the inputs' values exactly, no output rounding)."""
    return np.asarray(lhsT, dtype=np.float64).T @ np.asarray(rhs, dtype=np.float64)
