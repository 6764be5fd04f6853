"""Beta-1 RMSNorm (no weight) followed by a matmul, fp32 throughout, after the algorithm of
NKIBench's baseline `rmsnorm_matmul_M4096_N2048_K1024_0.py` (zhang677/AccelOpt): out =
(x / sqrt(mean(x^2))) @ w.

The input arrives as 128-row tiles [M/128, 128, K] and the weight as 128-row K tiles
[K/128, 128, N]. Rows are processed in blocks of 8 tiles (1024 rows). Per row tile: the
statistics come from one load of the tile, the normalization from a second load of the same
tile, and the normalized tile is transposed on the PE array (a matmul against an identity
loaded from a shared constant) into 128 x 128 K-major blocks. Per row block and 1024-column
half of N, the weight half is loaded again (8 loads of [128, 1024]) and every row tile of the
block is multiplied into [128, 512] PSUM tiles over the 8 K tiles. Used by the held-out check
(benchmarks/heldout.py); timed with values=False on trn1 at M=4096, N=2048, K=1024.
Run with `trnsim run`.

Where this differs in form from the baseline (same instructions, except the 32 memsets of 2.):
  1. The baseline declares every intermediate as one block-dimension tensor over all loop
     indices (e.g. [4, 8, 2, 4, 128, 128] fp32 in PSUM) and leaves placement to the
     compiler's liveness-based allocator; here each tile is allocated inside the loop whose
     indices it carries (written when trnsim placed a block tensor whole and did not spill).
  2. The baseline accumulates the row sums with nl.loop_reduce into an uninitialized tile;
     trnsim's loop_reduce adds onto its destination, so the tile is nl.zeros (one Vector
     memset of [128, 1] per row tile).
  3. The baseline's matmul PSUM tiles are nl.zeros(..., lazy_initialization=True) (trnsim
     accepts the flag and fills the tile); here the zero fill is taken as folded into the
     first matmul of each group (it overwrites, the other seven accumulate), so no memset is
     issued, which is what the compiler rule drop_psum_zero_fill makes of such a fill too.
  4. nisa.memset and nisa.tensor_scalar with engine=unknown run on the Vector Engine, and
     tiles the baseline allocates but never uses are left out.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

P = 128  # partitions: rows per row tile, K rows per weight tile, transpose block
ROW_TILES_PER_BLOCK = 8  # row tiles (of 128 rows) whose transposes are kept for the matmuls
NORM_CHUNK = 512  # free size of the square / scale / reduce / normalize instructions
W_COLS = 1024  # columns of w per load (and per stored output tile)
MM_COLS = 512  # moving free size of each matmul: one fp32 PSUM bank


@nki.jit
def rmsnorm_matmul(x, w):
    """RMSNorm of each row of x (mean over K, no epsilon, no weight), times w, in fp32.

    Steps, as in the baseline (every instruction fp32):
      0. (once) a [128, 1] zero bias (nisa.memset) and a [128, 128] identity (nl.load of
         nl.shared_constant)
      per row block b (8 row tiles) and row tile t in it:
      1. load x[t] [128, K]; per 512-column chunk: square (nisa.activation, Scalar Engine),
         times 1/K (nisa.tensor_scalar), row sum (nisa.tensor_reduce), summed over the
         chunks with nl.loop_reduce
      2. rsqrt of the [128, 1] mean square (nisa.activation with the zero bias)
      3. load x[t] again; per 512-column chunk: times the row's rsqrt (nisa.tensor_scalar),
         then per 128-column block a transpose on the PE array (nisa.nc_matmul with the
         identity as the 0/1 moving operand, is_transpose=True) and nl.copy PSUM -> SBUF
      per row block b and 1024-column half h of N:
      4. load the 8 K tiles of w[:, :, h] ([128, 1024] each)
      5. per row tile t and 512-column chunk: 8 accumulating nisa.nc_matmul into one PSUM
         bank (the first opens the group: the baseline's PSUM tile is lazily initialized,
         so no memset), nl.copy to SBUF; then store the [128, 1024] tile of out

    Dimensions:
        x: [M/128, 128, K], w: [K/128, 128, N], fp32; M/128 a multiple of 8, K a multiple
        of 512, N a multiple of 1024
    Returns:
        out: [M/128, 128, N], fp32
    """
    n_row_tiles, rows, k = x.shape
    n_k_tiles, k_rows, n = w.shape
    assert rows == P, f"x tiles have {rows} rows, not {P}"
    assert k_rows == P, f"w tiles have {k_rows} rows, not {P}"
    assert n_k_tiles * P == k, f"w holds {n_k_tiles * P} rows of K, x has K={k}"
    assert n_row_tiles % ROW_TILES_PER_BLOCK == 0, f"{n_row_tiles} row tiles: blocks of 8"
    assert k % NORM_CHUNK == 0, f"K {k} is not a multiple of {NORM_CHUNK}"
    assert n % W_COLS == 0, f"N {n} is not a multiple of {W_COLS}"
    fp32 = np.float32
    blocks_per_chunk = NORM_CHUNK // P
    out = nl.ndarray((n_row_tiles, P, n), dtype=fp32, buffer=nl.shared_hbm)

    i_p = nl.arange(P)[:, None]
    i_1 = nl.arange(1)[None, :]
    i_blk = nl.arange(P)[None, :]
    i_chunk = nl.arange(NORM_CHUNK)[None, :]
    i_k = nl.arange(k)[None, :]
    i_wc = nl.arange(W_COLS)[None, :]
    i_mm = nl.arange(MM_COLS)[None, :]

    # step 0
    zero_bias = nl.ndarray((nl.par_dim(P), 1), dtype=fp32, buffer=nl.sbuf)
    zero_bias[i_p, i_1] = nisa.memset(shape=(P, 1), value=0, dtype=fp32)
    identity = nl.ndarray((nl.par_dim(P), P), dtype=fp32, buffer=nl.sbuf)
    identity[i_p, i_blk] = nl.load(nl.shared_constant(np.identity(P, dtype=fp32))[i_p, i_blk])

    for b in nl.affine_range(n_row_tiles // ROW_TILES_PER_BLOCK):
        # x_norm^T of the block: [K tile, row tile] blocks of [128 K, 128 rows]
        xn_t = nl.ndarray((n_k_tiles, ROW_TILES_PER_BLOCK, nl.par_dim(P), P), dtype=fp32)
        for r in nl.affine_range(ROW_TILES_PER_BLOCK):
            t = b * ROW_TILES_PER_BLOCK + r
            # step 1
            x_sq_in = nl.ndarray((nl.par_dim(P), k), dtype=fp32, buffer=nl.sbuf)
            x_sq_in[i_p, i_k] = nl.load(x[t, i_p, i_k])
            # zero-filled: loop_reduce adds onto its destination (module docstring, 2.)
            mean_sq = nl.zeros((nl.par_dim(P), 1), dtype=fp32, buffer=nl.sbuf)
            for c in nl.affine_range(k // NORM_CHUNK):
                sq = nisa.activation(
                    op=nl.square,
                    data=x_sq_in[i_p, c * NORM_CHUNK + i_chunk],
                    bias=zero_bias[i_p, 0],
                    scale=1.0,
                    dtype=fp32,
                )
                sq_scaled = nisa.tensor_scalar(
                    data=sq, op0=nl.multiply, operand0=fp32(1.0 / k), dtype=fp32
                )
                part = nisa.tensor_reduce(nl.add, data=sq_scaled, axis=[1], dtype=fp32)
                mean_sq[...] = nl.loop_reduce(part, op=np.add, loop_indices=[c], dtype=fp32)
            # step 2
            inv_rms = nisa.activation(
                op=nl.rsqrt, data=mean_sq, bias=zero_bias[i_p, 0], scale=1.0, dtype=fp32
            )
            # step 3
            x_in = nl.ndarray((nl.par_dim(P), k), dtype=fp32, buffer=nl.sbuf)
            x_in[i_p, i_k] = nl.load(x[t, i_p, i_k])
            for c in nl.affine_range(k // NORM_CHUNK):
                xn = nisa.tensor_scalar(
                    data=x_in[i_p, c * NORM_CHUNK + i_chunk],
                    op0=nl.multiply,
                    operand0=inv_rms,
                    dtype=fp32,
                )
                for j in nl.affine_range(blocks_per_chunk):
                    xn_t_psum = nl.ndarray((nl.par_dim(P), P), dtype=fp32, buffer=nl.psum)
                    xn_t_psum[i_p, i_blk] = nisa.nc_matmul(
                        xn[i_p, j * P + i_blk],
                        identity,
                        is_moving_onezero=True,
                        is_transpose=True,
                    )
                    xn_t[c * blocks_per_chunk + j, r, i_p, i_blk] = nl.copy(xn_t_psum, dtype=fp32)
        for h in nl.affine_range(n // W_COLS):
            # step 4
            w_sb = nl.ndarray((n_k_tiles, nl.par_dim(P), W_COLS), dtype=fp32, buffer=nl.sbuf)
            for kt in nl.affine_range(n_k_tiles):
                w_sb[kt, i_p, i_wc] = nl.load(w[kt, i_p, h * W_COLS + i_wc])
            # step 5
            for r in nl.affine_range(ROW_TILES_PER_BLOCK):
                res = nl.ndarray((nl.par_dim(P), W_COLS), dtype=fp32, buffer=nl.sbuf)
                for c in nl.affine_range(W_COLS // MM_COLS):
                    acc = nl.ndarray((nl.par_dim(P), MM_COLS), dtype=fp32, buffer=nl.psum)
                    acc[i_p, i_mm] = nisa.nc_matmul(xn_t[0, r], w_sb[0, i_p, c * MM_COLS + i_mm])
                    for kt in nl.affine_range(1, n_k_tiles):
                        acc[i_p, i_mm] += nisa.nc_matmul(
                            xn_t[kt, r], w_sb[kt, i_p, c * MM_COLS + i_mm]
                        )
                    res[i_p, c * MM_COLS + i_mm] = nl.copy(acc, dtype=fp32)
                t = b * ROW_TILES_PER_BLOCK + r
                nl.store(out[t, i_p, h * W_COLS + i_wc], value=res)
    return out


def reference(x, w):
    """float64 numpy: (x / sqrt(mean(x^2, over K))) @ w, in the kernel's tiled layouts."""
    n_row_tiles, rows, k = x.shape
    x2 = x.reshape(n_row_tiles * rows, k).astype(np.float64)
    w2 = w.reshape(-1, w.shape[2]).astype(np.float64)
    normed = x2 / np.sqrt(np.mean(x2 * x2, axis=1, keepdims=True))
    return (normed @ w2).reshape(n_row_tiles, rows, w.shape[2])


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    x = rng.normal(size=(8, 128, 1024)).astype(np.float32)
    w = rng.normal(size=(8, 128, 1024)).astype(np.float32)
    got = rmsnorm_matmul(x, w)
    np.testing.assert_allclose(got, reference(x, w), rtol=1e-3, atol=1e-3)
    print("rmsnorm_matmul: ok")
