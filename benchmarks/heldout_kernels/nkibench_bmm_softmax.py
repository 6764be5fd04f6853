"""Beta-1 batched matmul followed by a softmax over each output row, fp32, after the algorithm
of NKIBench's baseline `bmm_softmax_B16_K64_M4096_N4096_0.py` (zhang677/AccelOpt):
out[b] = softmax(lhs[b] @ rhs[b]) over the last axis.

The matmul is the one of NKIBench's bmm baseline (see nkibench_bmm.py): the contraction K = 64
sits on the partitions, so each [128 rows, K] tile of lhs is transposed on the PE array (a
matmul against an identity loaded from a shared constant) into a [K, 1024] K-major block, and
every 128-row tile of that block is multiplied by the two 512-column halves of a [K, 1024]
block of rhs. Each [128, 512] score tile is copied to SBUF and its row maximum taken; the row
maxima are folded over all column blocks with nl.loop_reduce. Only when the whole [M, N]
score matrix of a batch is in SBUF does the second pass run: per 128-row tile, exp(s - max)
on the Scalar engine, row sums folded by nl.loop_reduce, one reciprocal, the scaling, and
stores of [128, 1024] tiles. Used by the calibration set (benchmarks/heldout.py,
benchmarks/calibrate.py); timed with values=False on trn1 at B = 16, M = N = 4096, K = 64.
Run with `trnsim run`.

Why the block tensors are kept: at the published shapes a batch's scores and exponentials
(M x N fp32 each, 512 KiB per partition) are far more than SBUF holds, and the baseline
declares every intermediate as one block-dimension tensor over all loop indices before the
loops. trnsim's Beta-1 allocator (trnsim/compat/neuronxcc/nki/_spill.py) places such tensors
block by block and spills and reloads blocks from those declarations and their accesses, so
this rewrite declares the same tensors (block dimensions, dtypes, buffers, order) and indexes
them as the baseline does; only names and presentation differ. At the published shapes it
issues the baseline's program (same instruction count and latency).

Deviations in form only: the tensors carry no explicit `name=` (trnsim uses names for labels
only), and arguments equal to their defaults (mask=None, negate=False, reverse0=False,
is_stationary_onezero=False) are left out.

Values: the baseline folds its row maxima and row sums with nl.loop_reduce into tensors it
never initializes (nl.ndarray); how the compiler starts such a reduction is not in the dump.
trnsim's loop_reduce is what the NKI docs define it as, dst = op(dst, x) on the destination's
current contents, so with values the baseline program (and this kernel by default) reads the
poison of fresh SBUF and returns NaN. `seed_accumulators=True` declares the two accumulators
with their identities instead (nl.full of the fp32 lowest, nl.zeros: a memset of each [128, 1]
block when it is first used, or of the whole tensor when trnsim places it whole). That makes
the values right and adds only those memsets to the program: values checks run with it,
timing without.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

P = 128  # partitions: rows of an lhs tile and of a score tile, identity size
M_BLOCK = 1024  # rows of lhs transposed together (8 tiles of 128)
N_BLOCK = 1024  # columns of rhs per load and of out per store (fp32: 4 KiB per partition)
MM_COLS = 512  # moving free size of each matmul: one fp32 PSUM bank
FP32_LOWEST = np.finfo(np.float32).min  # floor of the row maximum before it is negated


@nki.jit
def bmm_softmax(lhs, rhs, seed_accumulators=False):
    """softmax(lhs[b] @ rhs[b]) over the last axis, fp32, in the baseline's two passes.

    Steps (every instruction fp32):
      0. (once) load a [128, 128] identity (nl.shared_constant)
      per batch b, pass 1, per 1024-column block j of N (nl.affine_range):
      1. load rhs[b, :, block j] -> [K, 1024]
      per 1024-row block i of M:
      2. per 128-row tile t: load lhs[b, rows, :] -> [128, K]; nisa.nc_matmul transpose
         (is_transpose, the identity as the 0/1 moving operand) -> [K, 128] in PSUM; nl.copy
         into column block t of a [K, 1024] SBUF tile
      3. per 128-row tile t and 512-column half h: nisa.nc_matmul(stationary = the [K, 128]
         columns of tile t, moving = half h of the rhs block) -> [128, 512] PSUM; nl.copy to
         an SBUF score tile; its row max (nisa.tensor_reduce); nl.loop_reduce(max) of those
         over (j, h) into the [128, 1] row max of tile (i, t)
      pass 2, per 1024-row block i and 128-row tile t:
      4. -max(row max, fp32 lowest) (nisa.tensor_scalar, maximum then multiply by -1)
      5. per column block j and half h: e = exp(s - max) (nisa.activation, bias = -max); its
         row sum (nisa.tensor_reduce add); nl.loop_reduce(add) over (j, h) into the row sum
      6. 1 / row sum (nisa.reciprocal)
      7. per column block j: per half h, e * (1 / sum) (nisa.tensor_scalar) into a
         [128, 1024] tile; store it to out[b, row tile, :, block j]

    Dimensions:
        lhs: [B, M, K], rhs: [B, K, N], fp32; K <= 128, M a multiple of 1024, N of 1024
    seed_accumulators: start the row max at the fp32 lowest and the row sum at 0 (memsets
        the baseline does not issue; see the module docstring). False: the baseline program.
    Returns:
        out: [B, M / 128, 128, N], fp32 (row m of batch b at [b, m // 128, m % 128])
    """
    batch, m, k = lhs.shape
    assert rhs.shape[:2] == (batch, k), f"rhs {rhs.shape} must be [{batch}, {k}, N]"
    n = rhs.shape[2]
    assert k <= P, f"K {k} must fit the {P} partitions"
    assert m % M_BLOCK == 0, f"M {m} is not a multiple of {M_BLOCK}"
    assert n % N_BLOCK == 0, f"N {n} is not a multiple of {N_BLOCK}"
    fp32 = np.float32
    m_blocks, n_blocks = m // M_BLOCK, n // N_BLOCK
    tiles = M_BLOCK // P  # 128-row tiles per row block
    halves = N_BLOCK // MM_COLS  # matmuls per column block

    out = nl.ndarray((batch, m // P, P, n), dtype=fp32, buffer=nl.shared_hbm)
    identity_hbm = nl.shared_constant(np.identity(P, dtype=fp32))

    # Every intermediate, declared over all its loop indices as in the baseline (the order,
    # block dimensions and buffers are what trnsim's block allocator sees; module docstring).
    identity = nl.ndarray((nl.par_dim(P), P), dtype=fp32, buffer=nl.sbuf)
    rhs_sb = nl.ndarray((batch, n_blocks, nl.par_dim(k), N_BLOCK), dtype=fp32, buffer=nl.sbuf)
    lhs_sb = nl.ndarray(
        (n_blocks, batch, m_blocks, tiles, nl.par_dim(P), k), dtype=fp32, buffer=nl.sbuf
    )
    lhs_t_psum = nl.zeros(
        (batch, n_blocks, m_blocks, tiles, nl.par_dim(k), P),
        dtype=fp32,
        buffer=nl.psum,
        lazy_initialization=True,
    )
    lhs_t = nl.ndarray(
        (n_blocks, batch, m_blocks, nl.par_dim(k), M_BLOCK), dtype=fp32, buffer=nl.sbuf
    )
    scores_psum = nl.zeros(
        (batch, n_blocks, m_blocks, tiles, halves, nl.par_dim(P), MM_COLS),
        dtype=fp32,
        buffer=nl.psum,
        lazy_initialization=True,
    )
    scores = nl.ndarray(
        (m_blocks, tiles, batch, n_blocks, halves, nl.par_dim(P), MM_COLS),
        dtype=fp32,
        buffer=nl.sbuf,
    )
    stats_shape = (batch, m_blocks, tiles, nl.par_dim(P), 1)  # one [128, 1] per row tile
    if seed_accumulators:  # not in the baseline (module docstring)
        row_max = nl.full(stats_shape, FP32_LOWEST, dtype=fp32, buffer=nl.sbuf)
    else:
        row_max = nl.ndarray(stats_shape, dtype=fp32, buffer=nl.sbuf)
    neg_max = nl.ndarray(stats_shape, dtype=fp32, buffer=nl.sbuf)
    exps = nl.ndarray(
        (m_blocks, tiles, batch, n_blocks, halves, nl.par_dim(P), MM_COLS),
        dtype=fp32,
        buffer=nl.sbuf,
    )
    if seed_accumulators:
        row_sum = nl.zeros(stats_shape, dtype=fp32, buffer=nl.sbuf)
    else:
        row_sum = nl.ndarray(stats_shape, dtype=fp32, buffer=nl.sbuf)
    inv_sum = nl.ndarray(stats_shape, dtype=fp32, buffer=nl.sbuf)
    probs = nl.ndarray(
        (batch, m_blocks, tiles, n_blocks, nl.par_dim(P), N_BLOCK), dtype=fp32, buffer=nl.sbuf
    )
    part_max = nl.ndarray(
        (batch, n_blocks, m_blocks, tiles, halves, nl.par_dim(P), 1), dtype=fp32, buffer=nl.sbuf
    )
    part_sum = nl.ndarray(
        (batch, m_blocks, tiles, n_blocks, halves, nl.par_dim(P), 1), dtype=fp32, buffer=nl.sbuf
    )

    i_p = nl.arange(P)[:, None]  # partitions of a 128-row tile
    i_kp = nl.arange(k)[:, None]  # K on the partitions
    i_kf = nl.arange(k)[None, :]  # K along the free axis
    i_pf = nl.arange(P)[None, :]  # 128 columns
    i_blk = nl.arange(N_BLOCK)[None, :]  # a 1024-column block
    i_mm = nl.arange(MM_COLS)[None, :]  # a 512-column half

    # step 0
    identity[i_p, i_pf] = nl.load(identity_hbm[i_p, i_pf], dtype=fp32)
    for b in nl.affine_range(batch):
        # pass 1: scores and their row maxima
        for j in nl.affine_range(n_blocks):
            # step 1
            rhs_sb[b, j, i_kp, i_blk] = nl.load(rhs[b, i_kp, j * N_BLOCK + i_blk], dtype=fp32)
            for i in nl.affine_range(m_blocks):
                # step 2
                for t in nl.affine_range(tiles):
                    rows = i * M_BLOCK + t * P + i_p
                    lhs_sb[j, b, i, t, i_p, i_kf] = nl.load(lhs[b, rows, i_kf], dtype=fp32)
                    lhs_t_psum[b, j, i, t, i_kp, i_pf] = nisa.nc_matmul(
                        lhs_sb[j, b, i, t, i_p, i_kf],
                        identity[i_p, i_pf],
                        is_moving_onezero=True,
                        is_transpose=True,
                    )
                    lhs_t[j, b, i, i_kp, t * P + i_pf] = nl.copy(
                        lhs_t_psum[b, j, i, t, i_kp, i_pf], dtype=fp32
                    )
                # step 3
                for t in nl.affine_range(tiles):
                    for h in nl.affine_range(halves):
                        scores_psum[b, j, i, t, h, i_p, i_mm] = nisa.nc_matmul(
                            lhs_t[j, b, i, i_kp, t * P + i_pf],
                            rhs_sb[b, j, i_kp, h * MM_COLS + i_mm],
                        )
                        scores[i, t, b, j, h, i_p, i_mm] = nl.copy(
                            scores_psum[b, j, i, t, h, i_p, i_mm], dtype=fp32
                        )
                        part_max[b, j, i, t, h, i_p, 0] = nisa.tensor_reduce(
                            nl.max, data=scores[i, t, b, j, h, i_p, i_mm], axis=[1], dtype=fp32
                        )
                        row_max[b, i, t, i_p, 0] = nl.loop_reduce(
                            part_max[b, j, i, t, h, i_p, 0],
                            op=np.max,
                            loop_indices=[j, h],
                            dtype=fp32,
                        )
        # pass 2: normalise each 128-row tile
        for i in nl.affine_range(m_blocks):
            for t in nl.affine_range(tiles):
                # step 4
                neg_max[b, i, t, i_p, 0] = nisa.tensor_scalar(
                    data=row_max[b, i, t, i_p, 0],
                    op0=nl.maximum,
                    operand0=fp32(FP32_LOWEST),
                    op1=nl.multiply,
                    operand1=fp32(-1.0),
                    dtype=fp32,
                    engine=nisa.unknown_engine,
                )
                # step 5
                for j in nl.affine_range(n_blocks):
                    for h in nl.affine_range(halves):
                        exps[i, t, b, j, h, i_p, i_mm] = nisa.activation(
                            op=nl.exp,
                            data=scores[i, t, b, j, h, i_p, i_mm],
                            bias=neg_max[b, i, t, i_p, 0],
                            scale=1.0,
                            dtype=fp32,
                        )
                        part_sum[b, i, t, j, h, i_p, 0] = nisa.tensor_reduce(
                            nl.add, data=exps[i, t, b, j, h, i_p, i_mm], axis=[1], dtype=fp32
                        )
                        row_sum[b, i, t, i_p, 0] = nl.loop_reduce(
                            part_sum[b, i, t, j, h, i_p, 0],
                            op=np.add,
                            loop_indices=[j, h],
                            dtype=fp32,
                        )
                # step 6
                inv_sum[b, i, t, i_p, 0] = nisa.reciprocal(
                    data=row_sum[b, i, t, i_p, 0], dtype=fp32
                )
                # step 7
                for j in nl.affine_range(n_blocks):
                    for h in nl.affine_range(halves):
                        probs[b, i, t, j, i_p, h * MM_COLS + i_mm] = nisa.tensor_scalar(
                            data=exps[i, t, b, j, h, i_p, i_mm],
                            op0=nl.multiply,
                            operand0=inv_sum[b, i, t, i_p, 0],
                            dtype=fp32,
                            engine=nisa.unknown_engine,
                        )
                    nl.store(
                        out[b, i * tiles + t, i_p, j * N_BLOCK + i_blk],
                        value=probs[b, i, t, j, i_p, i_blk],
                    )
    return out


def reference(lhs, rhs):
    """float64 numpy softmax(lhs[b] @ rhs[b]) over the last axis, in the kernel's output
    layout [B, M / 128, 128, N]."""
    batch, m, _ = lhs.shape
    scores = np.matmul(lhs.astype(np.float64), rhs.astype(np.float64))
    e = np.exp(scores - scores.max(axis=2, keepdims=True))
    probs = e / e.sum(axis=2, keepdims=True)
    return probs.reshape(batch, m // P, P, rhs.shape[2])


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    lhs = rng.normal(size=(2, 2048, 64)).astype(np.float32)
    rhs = rng.normal(size=(2, 64, 2048)).astype(np.float32)
    got = bmm_softmax(lhs, rhs, seed_accumulators=True)
    np.testing.assert_allclose(got, reference(lhs, rhs), rtol=2e-5, atol=1e-30)
    print("bmm_softmax: ok")
