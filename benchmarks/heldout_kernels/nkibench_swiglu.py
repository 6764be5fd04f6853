"""Beta-1 SwiGLU MLP, out = (silu(x @ w_gate) * (x @ w_up)) @ w_down with silu(g) =
g / (1 + exp(-g)), fp32 throughout, after NKIBench's baseline `swiglu_M4096_N3072_K1024_0.py`
(zhang677/AccelOpt): M = 4096 rows, hidden size K = 1024, intermediate size N = 3072.

Both projections are computed transposed, [N rows, M columns]: the rows of x are loaded 512 at
a time (4 tiles of 128), transposed on the PE array (a matmul against an identity loaded from
a shared constant) into a K-major [128, K/128, 512] block, and each 128-row tile of a
1024-column block of the weight is the stationary operand of K/128 accumulating matmuls whose
moving operand is that block (512 rows of x: one fp32 PSUM bank). As in the baseline, x is
loaded and transposed again for every 1024-column block of N and for each projection (6 times
at N = 3072). The gate projection is copied to SBUF; the up projection stays in PSUM, where
the SiLU product reads it; the product h^T goes to an explicit HBM spill tensor and is loaded
back, per 512-row block of M, as the stationary operand of the down projection. Used by the
calibration set (benchmarks/heldout.py, benchmarks/calibrate.py); timed with values=False on
trn1 at M = 4096, N = 3072, K = 1024. Run with `trnsim run`.

Unlike the other rewrites here, this one keeps the baseline's block tensors: every
intermediate is declared once at the top of the kernel over the loop indices it carries (the
same block dimensions, dtypes, buffers and declaration order, PSUM tiles as
nl.zeros(..., lazy_initialization=True), the HBM spill tensor of h^T included) and indexed as
the baseline indexes it. Together they overflow SBUF, and trnsim's Beta-1 allocator
(trnsim/compat/neuronxcc/nki/_spill.py) places such tensors block by block and decides its
evictions and spills from these declarations and their accesses, so at the published shapes
this file issues the baseline's program (same instructions and latency). Only the
presentation differs: named sizes and loop counts derived from the input shapes, the x
transposes written once (_transpose_rows) for both projections.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

P = 128  # partitions: rows of an x tile, rows of a weight tile, identity size
N_BLOCK = 1024  # columns of w_gate / w_up per load (fp32: 4 KiB per partition)
MM_COLS = 512  # moving free size of a down-projection matmul: one fp32 PSUM bank


def _transpose_rows(x, identity, rows_sb, rows_t_psum, rows_t, nb, mb):
    """Load the 512 rows of block mb of x (one [128, K] tile per 128 rows) and transpose them
    on the PE array, 128 columns at a time, into rows_t[nb, mb] = x^T of the block, laid out
    [128 K rows, K tile, 512 rows of x]. nb (the N block being computed) only selects the
    blocks of the baseline's tensors."""
    _, tiles_per_block, _, n_k_tiles, _ = x.shape
    i_p = nl.arange(P)[:, None]
    i_t = nl.arange(P)[None, :]
    i_p3 = nl.arange(P)[:, None, None]
    i_kt3 = nl.arange(n_k_tiles)[None, :, None]
    i_f3 = nl.arange(P)[None, None, :]
    for t in nl.affine_range(tiles_per_block):
        rows_sb[nb, mb, t, i_p3, P * i_kt3 + i_f3] = nl.load(
            x[mb, t, i_p3, i_kt3, i_f3], dtype=np.float32
        )
        for kt in nl.affine_range(n_k_tiles):
            rows_t_psum[nb, mb, t, kt, i_p, i_t] = nisa.nc_matmul(
                rows_sb[nb, mb, t, i_p, P * kt + i_t],
                identity[i_p, i_t],
                is_moving_onezero=True,
                is_transpose=True,
            )
            rows_t[nb, mb, i_p, kt, P * t + i_t] = nl.copy(
                rows_t_psum[nb, mb, t, kt, i_p, i_t], dtype=np.float32
            )


@nki.jit
def swiglu(x, w_up, w_down, w_gate):
    """(silu(x @ w_gate) * (x @ w_up)) @ w_down in fp32, block by block as the baseline.

    Steps (every instruction fp32):
      0. (once) a [128, 1] zero bias (nisa.memset, engine left to the toolchain) and a
         [128, 128] identity (nl.load of nl.shared_constant)
      per 1024-column block nb of N (gate projection):
      1. load the K/128 tiles [128, 1024] of w_gate[:, :, block nb]
      per 512-row block mb of M:
      2. per 128-row tile t: load x[mb, t] as [128, K]; per 128-column block kt: transpose
         (nisa.nc_matmul, is_transpose, the identity as the 0/1 moving operand) -> [128, 128]
         PSUM, nl.copy into the x^T block [128, K/128, 512]
      3. per 128-column tile j of the N block: K/128 accumulating nisa.nc_matmul (stationary =
         columns j of a w_gate tile, moving = the matching K tile of x^T) -> gate^T [128, 512]
         in PSUM, nl.copy to SBUF
      per 1024-column block nb of N (up projection and SiLU):
      4. load w_up[:, :, block nb]; per 512-row block mb: steps 2 and 3 for w_up (up^T stays
         in PSUM), then per 128-column tile j:
      5. e = exp(-gate^T) (nisa.activation, Scalar Engine, scale=-1.0, the zero bias),
         d = 1 + e (nisa.tensor_scalar add, reverse0=True, engine left to the toolchain),
         r = 1 / d (nisa.reciprocal), s = gate^T * r and h^T = s * up^T (nl.multiply, the up
         operand read from PSUM); nl.store of h^T [128, 512] to the HBM spill tensor
      down projection:
      6. load the N/128 tiles [128, K_out] of w_down
      per 512-row block mb of M:
      7. load back the N/128 tiles [128, 512] of h^T for the block
      8. per 128-row tile t and 512-column half c of the output: N/128 accumulating
         nisa.nc_matmul (stationary = rows t of an h^T tile, moving = half c of a w_down tile)
         -> [128, 512] PSUM, nl.copy into a [128, K_out] SBUF tile; store it to out

    Dimensions (NKIBench: x [4096, 1024] -> [8, 4, 128, 8, 128], w_up and w_gate
    [1024, 3072] -> [8, 128, 3072], w_down [3072, 1024] -> [24, 128, 1024]):
        x: [M/512, 512/128, 128, K/128, 128] (row 512 a + 128 b + p, column 128 c + f),
        w_up, w_gate: [K/128, 128, N], w_down: [N/128, 128, K_out], fp32;
        N a multiple of 1024, K_out of 512
    Returns:
        out: [M/128, 128, K_out], fp32 (row m at [m // 128, m % 128])
    """
    n_m_blocks, tiles_per_block, rows, n_k_tiles, cols = x.shape
    n = w_gate.shape[2]
    k_out = w_down.shape[2]
    assert rows == P, f"x {x.shape}: tiles of {P} rows expected"
    assert cols == P, f"x {x.shape}: K tiles of {P} columns expected"
    assert w_gate.shape == w_up.shape == (n_k_tiles, P, n), "w_gate, w_up: [K/128, 128, N]"
    assert w_down.shape[:2] == (n // P, P), f"w_down {w_down.shape} must be [N/128, 128, K_out]"
    assert n % N_BLOCK == 0, f"N {n} is not a multiple of {N_BLOCK}"
    assert k_out % MM_COLS == 0, f"K_out {k_out} is not a multiple of {MM_COLS}"
    m_block = tiles_per_block * P  # rows of x per block: the moving free size of a projection
    assert m_block <= MM_COLS, f"{m_block} rows per block exceed one PSUM bank"
    fp32 = np.float32
    k = n_k_tiles * P
    n_blocks = n // N_BLOCK
    tiles_per_n_block = N_BLOCK // P
    halves = k_out // MM_COLS

    # the baseline's tensors, in its order (block dimensions first; see the module docstring)
    out = nl.ndarray((n_m_blocks * tiles_per_block, P, k_out), dtype=fp32, buffer=nl.shared_hbm)
    zero_bias = nl.ndarray((nl.par_dim(P), 1), dtype=fp32, name="zero_bias", buffer=nl.sbuf)
    identity_hbm = nl.shared_constant(np.identity(P, dtype=fp32))
    identity = nl.ndarray((nl.par_dim(P), P), dtype=fp32, name="identity", buffer=nl.sbuf)
    gate_w = nl.ndarray(
        (n_blocks, n_k_tiles, nl.par_dim(P), N_BLOCK), dtype=fp32, name="gate_w", buffer=nl.sbuf
    )
    gate_rows = nl.ndarray(
        (n_blocks, n_m_blocks, tiles_per_block, nl.par_dim(P), k),
        dtype=fp32,
        name="gate_rows",
        buffer=nl.sbuf,
    )
    gate_rows_t_psum = nl.zeros(
        (n_blocks, n_m_blocks, tiles_per_block, n_k_tiles, nl.par_dim(P), P),
        dtype=fp32,
        name="gate_rows_t_psum",
        buffer=nl.psum,
        lazy_initialization=True,
    )
    gate_rows_t = nl.ndarray(
        (n_blocks, n_m_blocks, nl.par_dim(P), n_k_tiles, m_block),
        dtype=fp32,
        name="gate_rows_t",
        buffer=nl.sbuf,
    )
    gate_psum = nl.zeros(
        (n_blocks, n_m_blocks, tiles_per_n_block, nl.par_dim(P), m_block),
        dtype=fp32,
        name="gate_psum",
        buffer=nl.psum,
        lazy_initialization=True,
    )
    gate_t = nl.ndarray(
        (n_blocks, tiles_per_n_block, n_m_blocks, nl.par_dim(P), m_block),
        dtype=fp32,
        name="gate_t",
        buffer=nl.sbuf,
    )
    up_w = nl.ndarray(
        (n_blocks, n_k_tiles, nl.par_dim(P), N_BLOCK), dtype=fp32, name="up_w", buffer=nl.sbuf
    )
    up_rows = nl.ndarray(
        (n_blocks, n_m_blocks, tiles_per_block, nl.par_dim(P), k),
        dtype=fp32,
        name="up_rows",
        buffer=nl.sbuf,
    )
    up_rows_t_psum = nl.zeros(
        (n_blocks, n_m_blocks, tiles_per_block, n_k_tiles, nl.par_dim(P), P),
        dtype=fp32,
        name="up_rows_t_psum",
        buffer=nl.psum,
        lazy_initialization=True,
    )
    up_rows_t = nl.ndarray(
        (n_blocks, n_m_blocks, nl.par_dim(P), n_k_tiles, m_block),
        dtype=fp32,
        name="up_rows_t",
        buffer=nl.sbuf,
    )
    up_psum = nl.zeros(
        (n_blocks, tiles_per_n_block, n_m_blocks, nl.par_dim(P), m_block),
        dtype=fp32,
        name="up_psum",
        buffer=nl.psum,
        lazy_initialization=True,
    )
    h_spill = nl.ndarray(
        shape=(n_blocks, tiles_per_n_block, n_m_blocks, P, m_block),
        dtype=fp32,
        name="h_spill",
        buffer=nl.hbm,
    )
    down_w = nl.ndarray(
        (n_blocks, tiles_per_n_block, nl.par_dim(P), k_out),
        dtype=fp32,
        name="down_w",
        buffer=nl.sbuf,
    )
    h_t = nl.ndarray(
        (n_blocks, tiles_per_n_block, n_m_blocks, nl.par_dim(P), m_block),
        dtype=fp32,
        name="h_t",
        buffer=nl.sbuf,
    )
    out_psum = nl.zeros(
        (n_m_blocks, tiles_per_block, halves, nl.par_dim(P), MM_COLS),
        dtype=fp32,
        name="out_psum",
        buffer=nl.psum,
        lazy_initialization=True,
    )
    out_sb = nl.ndarray(
        (n_m_blocks, tiles_per_block, nl.par_dim(P), k_out),
        dtype=fp32,
        name="out_sb",
        buffer=nl.sbuf,
    )
    silu_shape = (n_blocks, n_m_blocks, tiles_per_n_block, nl.par_dim(P), m_block)
    exp_neg = nl.ndarray(silu_shape, dtype=fp32, name="exp_neg", buffer=nl.sbuf)
    denom = nl.ndarray(silu_shape, dtype=fp32, name="denom", buffer=nl.sbuf)
    recip = nl.ndarray(silu_shape, dtype=fp32, name="recip", buffer=nl.sbuf)
    silu_gate = nl.ndarray(silu_shape, dtype=fp32, name="silu_gate", buffer=nl.sbuf)
    h_out = nl.ndarray(silu_shape, dtype=fp32, name="h_out", buffer=nl.sbuf)

    i_p = nl.arange(P)[:, None]
    i_t = nl.arange(P)[None, :]
    i_nb = nl.arange(N_BLOCK)[None, :]
    i_m = nl.arange(m_block)[None, :]
    i_mm = nl.arange(MM_COLS)[None, :]
    i_k_out = nl.arange(k_out)[None, :]

    # step 0
    zero_bias[i_p, 0] = nisa.memset(
        shape=(P, 1), value=np.uint16(0), dtype=fp32, engine=nisa.unknown_engine
    )
    identity[i_p, i_t] = nl.load(identity_hbm[i_p, i_t], dtype=fp32)

    # steps 1-3: gate^T
    for nb in nl.affine_range(n_blocks):
        for kt in nl.affine_range(n_k_tiles):
            gate_w[nb, kt, i_p, i_nb] = nl.load(w_gate[kt, i_p, N_BLOCK * nb + i_nb], dtype=fp32)
        for mb in nl.affine_range(n_m_blocks):
            _transpose_rows(x, identity, gate_rows, gate_rows_t_psum, gate_rows_t, nb, mb)
            for j in nl.affine_range(tiles_per_n_block):
                for kt in nl.affine_range(n_k_tiles):
                    gate_psum[nb, mb, j, i_p, i_m] += nisa.nc_matmul(
                        gate_w[nb, kt, i_p, P * j + i_t], gate_rows_t[nb, mb, i_p, kt, i_m]
                    )
                gate_t[nb, j, mb, i_p, i_m] = nl.copy(gate_psum[nb, mb, j, i_p, i_m], dtype=fp32)

    # steps 4-5: up^T, h^T = silu(gate^T) * up^T, spilled to HBM
    for nb in nl.affine_range(n_blocks):
        for kt in nl.affine_range(n_k_tiles):
            up_w[nb, kt, i_p, i_nb] = nl.load(w_up[kt, i_p, N_BLOCK * nb + i_nb], dtype=fp32)
        for mb in nl.affine_range(n_m_blocks):
            _transpose_rows(x, identity, up_rows, up_rows_t_psum, up_rows_t, nb, mb)
            for j in nl.affine_range(tiles_per_n_block):
                for kt in nl.affine_range(n_k_tiles):
                    up_psum[nb, j, mb, i_p, i_m] += nisa.nc_matmul(
                        up_w[nb, kt, i_p, P * j + i_t], up_rows_t[nb, mb, i_p, kt, i_m]
                    )
                gate = gate_t[nb, j, mb, i_p, i_m]
                exp_neg[nb, mb, j, i_p, i_m] = nisa.activation(
                    op=nl.exp, data=gate, bias=zero_bias[i_p, 0], scale=-1.0, dtype=fp32
                )
                denom[nb, mb, j, i_p, i_m] = nisa.tensor_scalar(
                    data=exp_neg[nb, mb, j, i_p, i_m],
                    op0=nl.add,
                    operand0=fp32(1.0),
                    reverse0=True,
                    dtype=fp32,
                    engine=nisa.unknown_engine,
                )
                recip[nb, mb, j, i_p, i_m] = nisa.reciprocal(
                    data=denom[nb, mb, j, i_p, i_m], dtype=fp32
                )
                silu_gate[nb, mb, j, i_p, i_m] = nl.multiply(
                    gate, recip[nb, mb, j, i_p, i_m], dtype=fp32
                )
                h_out[nb, mb, j, i_p, i_m] = nl.multiply(
                    silu_gate[nb, mb, j, i_p, i_m], up_psum[nb, j, mb, i_p, i_m], dtype=fp32
                )
                nl.store(h_spill[nb, j, mb, i_p, i_m], value=h_out[nb, mb, j, i_p, i_m])

    # step 6
    for nb in nl.affine_range(n_blocks):
        for j in nl.affine_range(tiles_per_n_block):
            down_w[nb, j, i_p, i_k_out] = nl.load(
                w_down[tiles_per_n_block * nb + j, i_p, i_k_out], dtype=fp32
            )

    # steps 7-8
    for mb in nl.affine_range(n_m_blocks):
        for nb in nl.affine_range(n_blocks):
            for j in nl.affine_range(tiles_per_n_block):
                h_t[nb, j, mb, i_p, i_m] = nl.load(h_spill[nb, j, mb, i_p, i_m], dtype=fp32)
        for t in nl.affine_range(tiles_per_block):
            for c in nl.affine_range(halves):
                for nb in nl.affine_range(n_blocks):
                    for j in nl.affine_range(tiles_per_n_block):
                        out_psum[mb, t, c, i_p, i_mm] += nisa.nc_matmul(
                            h_t[nb, j, mb, i_p, P * t + i_t],
                            down_w[nb, j, i_p, MM_COLS * c + i_mm],
                        )
                out_sb[mb, t, i_p, MM_COLS * c + i_mm] = nl.copy(
                    out_psum[mb, t, c, i_p, i_mm], dtype=fp32
                )
            nl.store(out[tiles_per_block * mb + t, i_p, i_k_out], value=out_sb[mb, t, i_p, i_k_out])
    return out


def reference(x, w_up, w_down, w_gate):
    """float64 numpy SwiGLU on the kernel's arguments, in the kernel's output layout."""
    n_m_blocks, tiles_per_block, rows, n_k_tiles, cols = x.shape
    x2 = np.asarray(x, dtype=np.float64).reshape(n_m_blocks * tiles_per_block * rows, -1)
    gate = x2 @ np.asarray(w_gate, dtype=np.float64).reshape(n_k_tiles * cols, -1)
    up = x2 @ np.asarray(w_up, dtype=np.float64).reshape(n_k_tiles * cols, -1)
    h = gate / (1.0 + np.exp(-gate)) * up
    down = np.asarray(w_down, dtype=np.float64)
    out = h @ down.reshape(-1, down.shape[2])
    return out.reshape(-1, P, down.shape[2])


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 128, 2, 128)).astype(np.float32)
    w_up, w_gate = (rng.standard_normal((2, 128, 2048)).astype(np.float32) for _ in range(2))
    w_down = rng.standard_normal((16, 128, 1024)).astype(np.float32)
    got = swiglu(x, w_up, w_down, w_gate)
    ref = reference(x, w_up, w_down, w_gate)
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-5 * np.abs(ref).max())
    print("swiglu: ok")
