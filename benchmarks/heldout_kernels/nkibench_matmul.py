"""Beta-1 matmul out = lhs @ rhs, fp32, after NKIBench's baseline
`matmul_M4096_N12288_K5120_0.py` (zhang677/AccelOpt): M = 4096, K = 5120, N = 12288.

The contraction K must sit on the partitions of both matmul operands, so each [128 rows, 1024]
block of lhs is transposed on the PE array first (a matmul against an identity loaded from a
shared constant, the identity the 0/1 moving operand), 128 columns at a time, and copied
PSUM -> SBUF into K-major [128, 128] tiles. Per 1024-column block of N, all K/128 tiles of
rhs for the block ([128, 1024] each, 4 KiB per partition) are loaded first; then per 128-row
tile of M its K/1024 lhs blocks are loaded and transposed, and each 512-column half of the
output tile accumulates K/128 matmuls in one PSUM bank, is copied to SBUF and the [128, 1024]
tile stored. As in the baseline, lhs is loaded and transposed again for every column block of
N (12 times at N = 12288). Used by the calibration set (benchmarks/heldout.py,
benchmarks/calibrate.py); timed with values=False on trn1 at M = 4096, N = 12288, K = 5120.
Run with `trnsim run`.

Unlike most rewrites here, this one keeps the baseline's block tensors: every intermediate is
declared once at the top of the kernel over the loop indices it carries (the same block
dimensions, dtypes, buffers and declaration order, PSUM tiles as nl.zeros(...,
lazy_initialization=True)) and indexed as the baseline indexes it. They overflow SBUF (the rhs
blocks alone are 240 KiB per partition at the published shapes), and trnsim's Beta-1 allocator
(trnsim/compat/neuronxcc/nki/_spill.py) places such tensors block by block and decides its
evictions and spills from these declarations and their accesses, so at the published shapes
this file issues the baseline's program (same instructions and latency). Only the
presentation differs: named sizes and loop counts derived from the input shapes.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

P = 128  # partitions: rows of an lhs / output tile, K rows of an rhs tile, identity size
K_TILES_PER_BLOCK = 8  # K tiles of 128 per lhs load ([128, 1024]: 4 KiB per partition)
N_BLOCK = 1024  # columns of rhs per load and of out per store (fp32: 4 KiB per partition)
MM_COLS = 512  # moving free size of each matmul: one fp32 PSUM bank


@nki.jit
def matmul(lhs, rhs):
    """lhs @ rhs in fp32, K on the partitions after a PE transpose of lhs.

    Steps (every instruction fp32):
      0. (once) load a [128, 128] identity (nl.shared_constant)
      per 1024-column block j of N:
      1. load the K/128 tiles rhs[kt, :, block j] -> [128, 1024]
      per 128-row tile r of M:
      2. per 1024-column block kb of K: load lhs[r, :, block kb, :] -> [128, 1024] (one DMA
         of [128, 8, 128]); per 128-column block: nisa.nc_matmul transpose (is_transpose, the
         identity as the 0/1 moving operand) -> [128, 128] PSUM, nl.copy to SBUF
      3. per 512-column half h: K/128 accumulating nisa.nc_matmul (stationary = a transposed
         [128 K, 128 rows] tile, moving = half h of the matching rhs tile) into one PSUM bank
         (the baseline's PSUM tile is lazily initialized: the first matmul opens the group),
         nl.copy into half h of a [128, 1024] SBUF tile
      4. store the tile to out[r, :, block j]

    Dimensions (NKIBench: lhs [4096, 5120] -> [32, 128, 40, 128], rhs [5120, 12288] ->
    [40, 128, 12288]):
        lhs: [M/128, 128, K/128, 128] (row 128 a + p, column 128 c + f),
        rhs: [K/128, 128, N], fp32; K a multiple of 1024, N of 1024
    Returns:
        out: [M/128, 128, N], fp32 (row m at [m // 128, m % 128])
    """
    n_m_tiles, rows, n_k_tiles, cols = lhs.shape
    n = rhs.shape[2]
    assert rows == P, f"lhs {lhs.shape}: tiles of {P} rows expected"
    assert cols == P, f"lhs {lhs.shape}: K tiles of {P} columns expected"
    assert rhs.shape[:2] == (n_k_tiles, P), f"rhs {rhs.shape} must be [{n_k_tiles}, {P}, N]"
    assert n_k_tiles % K_TILES_PER_BLOCK == 0, f"K {n_k_tiles * P} is not a multiple of 1024"
    assert n % N_BLOCK == 0, f"N {n} is not a multiple of {N_BLOCK}"
    fp32 = np.float32
    k_block = K_TILES_PER_BLOCK * P
    n_k_blocks = n_k_tiles // K_TILES_PER_BLOCK
    n_blocks = n // N_BLOCK
    halves = N_BLOCK // MM_COLS

    # the baseline's tensors, in its order (block dimensions first; see the module docstring)
    out = nl.ndarray((n_m_tiles, P, n), dtype=fp32, buffer=nl.shared_hbm)
    identity_hbm = nl.shared_constant(np.identity(P, dtype=fp32))
    identity = nl.ndarray((nl.par_dim(P), P), dtype=fp32, name="identity", buffer=nl.sbuf)
    rhs_sb = nl.ndarray(
        (n_blocks, n_k_blocks, K_TILES_PER_BLOCK, nl.par_dim(P), N_BLOCK),
        dtype=fp32,
        name="rhs_sb",
        buffer=nl.sbuf,
    )
    lhs_sb = nl.ndarray(
        (n_blocks, n_m_tiles, n_k_blocks, nl.par_dim(P), k_block),
        dtype=fp32,
        name="lhs_sb",
        buffer=nl.sbuf,
    )
    lhs_t_psum = nl.zeros(
        (n_blocks, n_m_tiles, n_k_blocks, K_TILES_PER_BLOCK, nl.par_dim(P), P),
        dtype=fp32,
        name="lhs_t_psum",
        buffer=nl.psum,
        lazy_initialization=True,
    )
    lhs_t = nl.ndarray(
        (n_blocks, n_m_tiles, n_k_blocks, nl.par_dim(P), K_TILES_PER_BLOCK, P),
        dtype=fp32,
        name="lhs_t",
        buffer=nl.sbuf,
    )
    acc = nl.zeros(
        (n_blocks, n_m_tiles, halves, nl.par_dim(P), MM_COLS),
        dtype=fp32,
        name="acc",
        buffer=nl.psum,
        lazy_initialization=True,
    )
    res = nl.ndarray(
        (n_m_tiles, n_blocks, nl.par_dim(P), N_BLOCK), dtype=fp32, name="res", buffer=nl.sbuf
    )

    i_p = nl.arange(P)[:, None]
    i_t = nl.arange(P)[None, :]
    i_nb = nl.arange(N_BLOCK)[None, :]
    i_mm = nl.arange(MM_COLS)[None, :]
    i_p3 = nl.arange(P)[:, None, None]
    i_kt3 = nl.arange(K_TILES_PER_BLOCK)[None, :, None]
    i_f3 = nl.arange(P)[None, None, :]

    # step 0
    identity[i_p, i_t] = nl.load(identity_hbm[i_p, i_t], dtype=fp32)

    for j in nl.affine_range(n_blocks):
        # step 1
        for kb in nl.affine_range(n_k_blocks):
            for kt in nl.affine_range(K_TILES_PER_BLOCK):
                rhs_sb[j, kb, kt, i_p, i_nb] = nl.load(
                    rhs[K_TILES_PER_BLOCK * kb + kt, i_p, N_BLOCK * j + i_nb], dtype=fp32
                )
        for r in nl.affine_range(n_m_tiles):
            # step 2
            for kb in nl.affine_range(n_k_blocks):
                lhs_sb[j, r, kb, i_p3, P * i_kt3 + i_f3] = nl.load(
                    lhs[r, i_p3, K_TILES_PER_BLOCK * kb + i_kt3, i_f3], dtype=fp32
                )
                for kt in nl.affine_range(K_TILES_PER_BLOCK):
                    lhs_t_psum[j, r, kb, kt, i_p, i_t] = nisa.nc_matmul(
                        lhs_sb[j, r, kb, i_p, P * kt + i_t],
                        identity[i_p, i_t],
                        is_moving_onezero=True,
                        is_transpose=True,
                    )
                    lhs_t[j, r, kb, i_p, kt, i_t] = nl.copy(
                        lhs_t_psum[j, r, kb, kt, i_p, i_t], dtype=fp32
                    )
            # step 3
            for h in nl.affine_range(halves):
                for kb in nl.affine_range(n_k_blocks):
                    for kt in nl.affine_range(K_TILES_PER_BLOCK):
                        acc[j, r, h, i_p, i_mm] += nisa.nc_matmul(
                            lhs_t[j, r, kb, i_p, kt, i_t],
                            rhs_sb[j, kb, kt, i_p, MM_COLS * h + i_mm],
                        )
                res[r, j, i_p, MM_COLS * h + i_mm] = nl.copy(acc[j, r, h, i_p, i_mm], dtype=fp32)
            # step 4
            nl.store(out[r, i_p, N_BLOCK * j + i_nb], value=res[r, j, i_p, i_nb])
    return out


def reference(lhs, rhs):
    """float64 numpy lhs @ rhs on the kernel's arguments, in the kernel's output layout."""
    n_m_tiles, rows, n_k_tiles, cols = lhs.shape
    a = np.asarray(lhs, dtype=np.float64).reshape(n_m_tiles * rows, n_k_tiles * cols)
    b = np.asarray(rhs, dtype=np.float64).reshape(n_k_tiles * cols, rhs.shape[2])
    return (a @ b).reshape(n_m_tiles, rows, rhs.shape[2])


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    lhs = rng.standard_normal((2, 128, 16, 128)).astype(np.float32)
    rhs = rng.standard_normal((16, 128, 2048)).astype(np.float32)
    got = matmul(lhs, rhs)
    ref = reference(lhs, rhs)
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-5 * np.abs(ref).max())
    print("matmul: ok")
