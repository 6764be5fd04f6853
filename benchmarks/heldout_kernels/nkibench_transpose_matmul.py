"""Beta-1 out = lhs^T @ rhs with both operands K-major, fp32, after the algorithm of NKIBench's
baseline `transpose_matmul_M4096_K2048_N10944_0.py` (zhang677/AccelOpt).

NKIBench hands the kernel lhs [K, M] and rhs [K, N] reshaped to [128, K / 128, M] and
[128, K / 128, N]: row k of K lives on partition k // (K / 128), so K tile kt is the rows
{p * K / 128 + kt} (any order of K gives the same sums, as long as both operands use it). The
contraction is on the partitions already, so no transpose is needed: per 1024-column block of
M, the 16 K tiles of lhs ([128, 1024], 4 KiB per partition) are loaded; per 1024-column block
of N, the 16 K tiles of rhs; then per 128-column tile of the M block and 512-column half of the
N block, 16 matmuls accumulate into one PSUM bank, are copied to SBUF and stored per [128, 1024]
tile of out. N = 10944 leaves a last block of 704 columns (halves of 512 and 192), where the
baseline masks its instructions to the valid columns: here they are that size. Used by the
calibration set (benchmarks/heldout.py, benchmarks/calibrate.py); timed with values=False on
trn1 at M = 4096, K = 2048, N = 10944. Run with `trnsim run`.

Where this differs in form from the baseline (the same instructions): the baseline declares
every intermediate as one block-dimension tensor over all loop indices, leaving placement to
the compiler's allocator, and its PSUM tiles are lazily initialised nl.zeros; here each tile is
allocated inside the loop whose indices it carries, and the first matmul of each accumulation
group opens it (no memset).
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

P = 128  # partitions: K rows per tile, rows of an output tile
BLOCK = 1024  # columns of lhs / rhs per load and of out per store (fp32: 4 KiB per partition)
MM_COLS = 512  # moving free size of each matmul: one fp32 PSUM bank


@nki.jit
def transpose_matmul(lhs, rhs):
    """lhs^T @ rhs in fp32, K on the partitions of both operands.

    Steps (every instruction fp32):
      per 1024-column block i of M:
      1. load the K / 128 tiles lhs[:, kt, block i] -> [128, 1024] each
      per 1024-column block j of N (the last one narrower when N is not a multiple):
      2. load the K / 128 tiles rhs[:, kt, block j] -> [128, width] each
      3. per 128-column tile t of block i and 512-column half h of block j: K / 128
         nisa.nc_matmul(stationary = lhs tile kt columns t, moving = rhs tile kt half h)
         accumulating into one [128, 512] PSUM bank; nl.copy into half h of a [128, width]
         SBUF tile; store it to out[8 i + t, :, block j]

    Dimensions:
        lhs: [128, K / 128, M], rhs: [128, K / 128, N], fp32; M a multiple of 1024
    Returns:
        out: [M / 128, 128, N], fp32 (row m at [m // 128, m % 128])
    """
    parts, k_tiles, m = lhs.shape
    assert parts == P, f"lhs has {parts} partitions, not {P}"
    assert rhs.shape[:2] == (P, k_tiles), f"rhs {rhs.shape} must be [{P}, {k_tiles}, N]"
    n = rhs.shape[2]
    assert m % BLOCK == 0, f"M {m} is not a multiple of {BLOCK}"
    fp32 = np.float32
    tiles_per_block = BLOCK // P
    out = nl.ndarray((m // P, P, n), dtype=fp32, buffer=nl.shared_hbm)
    i_p = nl.arange(P)[:, None]
    i_blk = nl.arange(P)[None, :]
    i_b = nl.arange(BLOCK)[None, :]

    for i in nl.affine_range(m // BLOCK):
        lhs_sb = nl.ndarray((k_tiles, nl.par_dim(P), BLOCK), dtype=fp32, buffer=nl.sbuf)
        for kt in nl.affine_range(k_tiles):
            lhs_sb[kt, i_p, i_b] = nl.load(lhs[i_p, kt, i * BLOCK + i_b])
        for j in nl.affine_range((n + BLOCK - 1) // BLOCK):
            width = min(BLOCK, n - j * BLOCK)
            i_w = nl.arange(width)[None, :]
            rhs_sb = nl.ndarray((k_tiles, nl.par_dim(P), width), dtype=fp32, buffer=nl.sbuf)
            for kt in nl.affine_range(k_tiles):
                rhs_sb[kt, i_p, i_w] = nl.load(rhs[i_p, kt, j * BLOCK + i_w])
            for t in nl.affine_range(tiles_per_block):
                res = nl.ndarray((nl.par_dim(P), width), dtype=fp32, buffer=nl.sbuf)
                for h in nl.affine_range((width + MM_COLS - 1) // MM_COLS):
                    cols = min(MM_COLS, width - h * MM_COLS)
                    i_c = nl.arange(cols)[None, :]
                    acc = nl.ndarray((nl.par_dim(P), cols), dtype=fp32, buffer=nl.psum)
                    acc[i_p, i_c] = nisa.nc_matmul(
                        lhs_sb[0, i_p, t * P + i_blk], rhs_sb[0, i_p, h * MM_COLS + i_c]
                    )
                    for kt in nl.affine_range(1, k_tiles):
                        acc[i_p, i_c] += nisa.nc_matmul(
                            lhs_sb[kt, i_p, t * P + i_blk], rhs_sb[kt, i_p, h * MM_COLS + i_c]
                        )
                    res[i_p, h * MM_COLS + i_c] = nl.copy(acc, dtype=fp32)
                nl.store(out[i * tiles_per_block + t, i_p, j * BLOCK + i_w], value=res)
    return out


def reference(lhs, rhs):
    """float64 numpy lhs^T @ rhs from the [128, K / 128, .] layouts, in the output layout."""
    k = lhs.shape[0] * lhs.shape[1]
    full = lhs.reshape(k, -1).astype(np.float64).T @ rhs.reshape(k, -1).astype(np.float64)
    return full.reshape(-1, P, rhs.shape[2])


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    lhs = rng.normal(size=(128, 2, 1024)).astype(np.float32)
    rhs = rng.normal(size=(128, 2, 1600)).astype(np.float32)
    got = transpose_matmul(lhs, rhs)
    np.testing.assert_allclose(got, reference(lhs, rhs), rtol=1e-4, atol=1e-3)
    print("transpose_matmul: ok")
