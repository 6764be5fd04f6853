"""Beta-1 full (non-causal) grouped-query attention, fp32, after the algorithm of NKIBench's
baseline `gqa_full_B1_N4096_QH16_KH8_D128_0.py` (zhang677/AccelOpt):
out[h] = softmax(q[h] k[h // G]^T / sqrt(D)) v[h // G] for QH query heads sharing KH = QH / G
key/value heads (G = 2 at the published QH = 16, KH = 8).

NKIBench hands the kernel its [1, N, heads, D] inputs reshaped (NKIBench/reference/
gqa_full_B1_N4096_QH16_KH8_D128_numpy_2.py): q as [N / 128, 128, QH, D], k as
[1, N / 512, 4, 128, KH, D] and v as [1, N / 128, 128, KH * D]; token n is row n % 128 of its
128-token tile. Every contraction needs its axis on the partitions, so q and k are transposed
on the PE array (a matmul against an identity loaded from a shared constant, the identity the
0/1 moving operand) into D-major tiles: q^T per 128-token tile and 8-head load, k^T per
512-key block for all KH heads. The scores are computed in two passes over the keys (each
transposes half the key blocks, then multiplies every query tile of every head by them, one
[128 queries, 512 keys] PSUM bank per matmul), scaled by 1 / sqrt(D) on the way to SBUF, with
row maxima folded over all key blocks by nl.loop_reduce. Only then, per head and query tile:
exp(score - max) on the Scalar engine with its row sums folded the same way, one reciprocal, the
normalised probabilities transposed back on the PE array (keys onto the partitions) and
accumulated against the v tiles into one [128 queries, D] PSUM tile, copied and stored. Used
by the calibration set (benchmarks/heldout.py, benchmarks/calibrate.py); timed with
values=False on trn1 at N = 4096, QH = 16, KH = 8, D = 128. Run with `trnsim run`.

Why the block tensors are kept: at the published shapes the scores, exponentials and
probabilities (each QH x N x N fp32: 512 KiB per partition per head) are far more than SBUF
holds, and the baseline declares every intermediate as one block-dimension tensor over all loop
indices before the loops. trnsim's Beta-1 allocator (trnsim/compat/neuronxcc/nki/_spill.py)
places such tensors block by block and spills and reloads blocks from those declarations and
their accesses, so this rewrite declares the same tensors (block dimensions, dtypes, buffers,
order) and indexes them, and reads its operands, in the baseline's order; only names and
presentation differ. At the published shapes it issues the baseline's program (same
instruction count and latency).

Why `seed_reductions` (default False, the baseline's program): the baseline folds the row
maxima and row sums with nl.loop_reduce into tensors it declares with nl.ndarray and never
fills. NKIBench checks the compiled baseline on hardware, so the toolchain must start those
folds itself; trnsim's nl.loop_reduce is op(destination, x) as the NKI docs define it, so it
reads the undefined (NaN-poisoned) destination and the outputs are NaN. Timing is unaffected
(values play no part in it), so the default keeps the baseline's instructions for the
calibration set; seed_reductions=True fills the two destinations first (fp32 lowest for the
maxima, 0 for the sums: nl.full / nl.zeros, memsets the baseline does not issue) and is how
the values are checked.

Where the loop counts come from: the published shapes fix every loop of the baseline but not
how it splits the 8 key blocks into 2 passes of 4; here the number of passes is the constant
K_PASSES = 2 and the blocks per pass follow from N (so N = 1024 is the smallest N). The
query heads are loaded up to 8 at a time (Q_LOAD_HEADS; at D = 128 a [128, 1024] fp32 load,
4 KiB per partition), so QH is below 8 or a multiple of 8, and G divides the heads of a load.

Deviations in form only: the tensors carry no explicit `name=` (trnsim uses names for labels
only), and arguments equal to their defaults (mask=None, negate=False, reverse0/1=False,
is_stationary_onezero=False) are left out. The score scale is the baseline's constant, 1/sqrt(D)
printed to 7 significant digits (0.08838835 at D = 128: one ulp above the fp32 nearest 1/sqrt(128)).
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

P = 128  # partitions: tokens per tile, identity size
KEY_BLOCK = 512  # keys per score matmul: one fp32 PSUM bank
SUB = KEY_BLOCK // P  # 128-key tiles per key block
Q_LOAD_HEADS = 8  # query heads per q load, at most ([128, 8 * D] fp32)
K_PASSES = 2  # passes over the key blocks in the score phase
FP32_LOWEST = np.finfo(np.float32).min  # floor of the row maximum before it is negated


@nki.jit
def gqa(q, k, v, seed_reductions=False):
    """softmax(q k^T / sqrt(D)) v per query head, each group of G heads sharing a k/v head.

    Steps (every instruction fp32). G = QH / KH, L = min(8, QH) query heads per q load; query
    head h = L c + G j + r (q chunk c, k/v head j of the chunk, repeat r) uses k/v head
    h // G = (L / G) c + j.
      0. (once) load a [128, 128] identity (nl.shared_constant)
      1. per 128-token tile t and L-head chunk c: load q[t, :, chunk c, :] -> [128, L D]; per
         head: nisa.nc_matmul transpose (identity as the 0/1 moving operand) -> [D, 128] PSUM;
         nl.copy into the q^T tile of (c, t)
      per key pass s:
      2. per block b of the pass and 128-key tile u: load k[0, block, u] -> [128, KH D]; per
         k/v head: transpose -> [D, 128] PSUM; nl.copy into column tile u of the head's
         [D, 512] k^T block
      3. per chunk c, k/v head j of the chunk, block b, repeat r, query tile t:
         nisa.nc_matmul(stationary = q^T of head h, moving = k^T block) -> [128, 512] PSUM;
         times 1/sqrt(D) (nisa.tensor_scalar) into SBUF; its row max (nisa.tensor_reduce);
         nl.loop_reduce(max) over (s, b) into the row max of (h, t)
      4. (once) load every 128-token tile of v -> [128, KH D]
      per repeat r, chunk c, k/v head j and query tile t:
      5. -max(row max, fp32 lowest) (nisa.tensor_scalar, maximum then multiply by -1)
      6. per pass s and block b: e = exp(score - max) (nisa.activation, bias = -max); its row sum
         (nisa.tensor_reduce add); nl.loop_reduce(add) over (b, s) into the row sum
      7. 1 / row sum (nisa.reciprocal)
      8. per pass s and block b: e * (1 / sum) (nisa.tensor_scalar) -> [128, 512]; per 128-key
         tile u: transpose -> [128 keys, 128 queries] PSUM; nl.copy to SBUF
      9. per key tile: nisa.nc_matmul(stationary = its probabilities^T, moving = the head's D
         columns of that v tile), accumulated (+=) into one [128, D] PSUM tile; nl.copy; store
         to out[0, k/v head, r, t]

    seed_reductions: fill the nl.loop_reduce destinations before the loops (extra memsets;
        without it the values are NaN in trnsim and the program is the baseline's: module
        docstring)

    Dimensions:
        q: [N / 128, 128, QH, D]; k: [1, N / 512, 4, 128, KH, D]; v: [1, N / 128, 128, KH D];
        fp32; N a multiple of 1024, QH below 8 or a multiple of 8, G = QH / KH dividing L,
        D <= 128
    Returns:
        out: [1, KH, G, N / 128, 128, D], fp32 (query head h = G * kv head + r, token n at
        [n // 128, n % 128]; NKIBench reshapes it to [1, QH, N, D])
    """
    n_tiles, _, q_heads, d = q.shape
    batch, n_blocks, sub, _, kv_heads, _ = k.shape
    assert batch == 1, f"k {k.shape}: one batch only (q has no batch axis)"
    assert sub == SUB, f"k {k.shape} must be [1, N / 512, {SUB}, 128, KH, D]"
    assert n_tiles == n_blocks * SUB, f"q {q.shape} and k {k.shape} disagree on N"
    assert v.shape == (batch, n_tiles, P, kv_heads * d), (
        f"v {v.shape} must be [1, N/128, 128, KH D]"
    )
    assert d <= P, f"head dim {d} must fit the {P} partitions"
    load_heads = min(Q_LOAD_HEADS, q_heads)  # query heads per q load
    assert q_heads % load_heads == 0, f"QH {q_heads} is not a multiple of {Q_LOAD_HEADS}"
    assert n_blocks % K_PASSES == 0, f"N / 512 = {n_blocks} is not a multiple of {K_PASSES}"
    group = q_heads // kv_heads  # query heads per k/v head
    assert group * kv_heads == q_heads, f"KH {kv_heads} does not divide QH {q_heads}"
    assert load_heads % group == 0, f"G {group} does not divide {load_heads}"
    fp32 = np.float32
    chunks = q_heads // load_heads  # q loads per token tile
    kv_per_chunk = load_heads // group  # k/v heads whose query heads share a q load
    blocks = n_blocks // K_PASSES  # key blocks per pass
    scale = fp32(f"{1 / np.sqrt(d):.7g}")  # the baseline's constant (module docstring)

    out = nl.ndarray((batch, kv_heads, group, n_tiles, P, d), dtype=fp32, buffer=nl.shared_hbm)
    identity_hbm = nl.shared_constant(np.identity(P, dtype=fp32))

    # Every intermediate, declared over all its loop indices as in the baseline (the order,
    # block dimensions and buffers are what trnsim's block allocator sees; module docstring).
    identity = nl.ndarray((nl.par_dim(P), P), dtype=fp32, buffer=nl.sbuf)
    q_sb = nl.ndarray((n_tiles, chunks, nl.par_dim(P), load_heads * d), dtype=fp32, buffer=nl.sbuf)
    q_t_psum = nl.zeros(
        (n_tiles, chunks, load_heads, nl.par_dim(d), P),
        dtype=fp32,
        buffer=nl.psum,
        lazy_initialization=True,
    )
    q_t = nl.ndarray((chunks, n_tiles, nl.par_dim(d), load_heads, P), dtype=fp32, buffer=nl.sbuf)
    k_sb = nl.ndarray(
        (K_PASSES, blocks, SUB, nl.par_dim(P), kv_heads * d), dtype=fp32, buffer=nl.sbuf
    )
    k_t_psum = nl.zeros(
        (K_PASSES, blocks, SUB, kv_heads, nl.par_dim(d), P),
        dtype=fp32,
        buffer=nl.psum,
        lazy_initialization=True,
    )
    k_t = nl.ndarray(
        (K_PASSES, blocks, nl.par_dim(d), kv_heads, KEY_BLOCK), dtype=fp32, buffer=nl.sbuf
    )
    # scores, exponentials: [query tile, chunk, k/v head of chunk, repeat, pass, block]
    head_blocks = (n_tiles, chunks, kv_per_chunk, group, K_PASSES, blocks)
    scores_psum = nl.zeros(
        (*head_blocks, nl.par_dim(P), KEY_BLOCK),
        dtype=fp32,
        buffer=nl.psum,
        lazy_initialization=True,
    )
    scores = nl.ndarray((*head_blocks, nl.par_dim(P), KEY_BLOCK), dtype=fp32, buffer=nl.sbuf)
    # per-row statistics: [chunk, k/v head of chunk, repeat, query tile] (neg_max: repeat first)
    rows = (chunks, kv_per_chunk, group, n_tiles)
    stat = (*rows, nl.par_dim(P), 1)
    # the nl.loop_reduce destinations: undefined in the baseline (seed_reductions: docstring)
    if seed_reductions:
        row_max = nl.full(stat, FP32_LOWEST, dtype=fp32, buffer=nl.sbuf)
    else:
        row_max = nl.ndarray(stat, dtype=fp32, buffer=nl.sbuf)
    v_sb = nl.ndarray((n_blocks, SUB, nl.par_dim(P), kv_heads * d), dtype=fp32, buffer=nl.sbuf)
    neg_max = nl.ndarray(
        (group, chunks, kv_per_chunk, n_tiles, nl.par_dim(P), 1), dtype=fp32, buffer=nl.sbuf
    )
    exps = nl.ndarray((*head_blocks, nl.par_dim(P), KEY_BLOCK), dtype=fp32, buffer=nl.sbuf)
    if seed_reductions:
        row_sum = nl.zeros(stat, dtype=fp32, buffer=nl.sbuf)
    else:
        row_sum = nl.ndarray(stat, dtype=fp32, buffer=nl.sbuf)
    inv_sum = nl.ndarray(stat, dtype=fp32, buffer=nl.sbuf)
    probs = nl.ndarray(
        (n_tiles, chunks, kv_per_chunk, group, n_blocks, nl.par_dim(P), KEY_BLOCK),
        dtype=fp32,
        buffer=nl.sbuf,
    )
    # per (repeat, chunk, k/v head of chunk, query tile): the output's loop order
    heads_out = (group, chunks, kv_per_chunk, n_tiles)
    probs_t_psum = nl.zeros(
        (*heads_out, K_PASSES, blocks, SUB, nl.par_dim(P), P),
        dtype=fp32,
        buffer=nl.psum,
        lazy_initialization=True,
    )
    probs_t = nl.ndarray(
        (n_blocks, SUB, chunks, kv_per_chunk, group, n_tiles, nl.par_dim(P), P),
        dtype=fp32,
        buffer=nl.sbuf,
    )
    out_psum = nl.zeros(
        (*heads_out, nl.par_dim(P), d), dtype=fp32, buffer=nl.psum, lazy_initialization=True
    )
    out_sb = nl.ndarray((*rows, nl.par_dim(P), d), dtype=fp32, buffer=nl.sbuf)
    part_max = nl.ndarray(
        (K_PASSES, chunks, kv_per_chunk, blocks, group, n_tiles, nl.par_dim(P), 1),
        dtype=fp32,
        buffer=nl.sbuf,
    )
    part_sum = nl.ndarray(
        (*heads_out, K_PASSES, blocks, nl.par_dim(P), 1), dtype=fp32, buffer=nl.sbuf
    )

    i_p = nl.arange(P)[:, None]  # partitions of a token tile
    i_dp = nl.arange(d)[:, None]  # D on the partitions
    i_pf = nl.arange(P)[None, :]  # 128 columns (tokens)
    i_df = nl.arange(d)[None, :]  # D columns
    i_blk = nl.arange(KEY_BLOCK)[None, :]  # a 512-key block
    i_kvd = nl.arange(kv_heads * d)[None, :]  # a v tile: D columns per k/v head
    # [128 tokens, heads, D] views of a q / k load and their flat [128, heads * D] tile columns
    i_p3 = nl.arange(P)[:, None, None]
    i_qh3 = nl.arange(load_heads)[None, :, None]
    i_kh3 = nl.arange(kv_heads)[None, :, None]
    i_d3 = nl.arange(d)[None, None, :]

    # step 0
    identity[i_p, i_pf] = nl.load(identity_hbm[i_p, i_pf], dtype=fp32)
    # step 1: q^T per token tile and head
    for t in nl.affine_range(n_tiles):
        for c in nl.affine_range(chunks):
            q_sb[t, c, i_p3, d * i_qh3 + i_d3] = nl.load(
                q[t, i_p3, load_heads * c + i_qh3, i_d3], dtype=fp32
            )
            for hl in nl.affine_range(load_heads):
                q_t_psum[t, c, hl, i_dp, i_pf] = nisa.nc_matmul(
                    q_sb[t, c, i_p, d * hl + i_df],
                    identity[i_p, i_pf],
                    is_moving_onezero=True,
                    is_transpose=True,
                )
                q_t[c, t, i_dp, hl, i_pf] = nl.copy(q_t_psum[t, c, hl, i_dp, i_pf], dtype=fp32)
    for s in nl.affine_range(K_PASSES):
        # step 2: k^T of the pass's key blocks
        for b in nl.affine_range(blocks):
            for u in nl.affine_range(SUB):
                k_sb[s, b, u, i_p3, d * i_kh3 + i_d3] = nl.load(
                    k[0, b + blocks * s, u, i_p3, i_kh3, i_d3], dtype=fp32
                )
                for kv in nl.affine_range(kv_heads):
                    k_t_psum[s, b, u, kv, i_dp, i_pf] = nisa.nc_matmul(
                        k_sb[s, b, u, i_p, d * kv + i_df],
                        identity[i_p, i_pf],
                        is_moving_onezero=True,
                        is_transpose=True,
                    )
                    k_t[s, b, i_dp, kv, P * u + i_pf] = nl.copy(
                        k_t_psum[s, b, u, kv, i_dp, i_pf], dtype=fp32
                    )
        # step 3: scaled scores and their running row maxima
        for c in nl.affine_range(chunks):
            for j in nl.affine_range(kv_per_chunk):
                for b in nl.affine_range(blocks):
                    for r in nl.affine_range(group):
                        for t in nl.affine_range(n_tiles):
                            scores_psum[t, c, j, r, s, b, i_p, i_blk] = nisa.nc_matmul(
                                q_t[c, t, i_dp, r + group * j, i_pf],
                                k_t[s, b, i_dp, j + kv_per_chunk * c, i_blk],
                            )
                            scores[t, c, j, r, s, b, i_p, i_blk] = nisa.tensor_scalar(
                                data=scores_psum[t, c, j, r, s, b, i_p, i_blk],
                                op0=nl.multiply,
                                operand0=scale,
                                dtype=fp32,
                                engine=nisa.unknown_engine,
                            )
                            part_max[s, c, j, b, r, t, i_p, 0] = nisa.tensor_reduce(
                                nl.max,
                                data=scores[t, c, j, r, s, b, i_p, i_blk],
                                axis=[1],
                                dtype=fp32,
                            )
                            row_max[c, j, r, t, i_p, 0] = nl.loop_reduce(
                                part_max[s, c, j, b, r, t, i_p, 0],
                                op=np.max,
                                loop_indices=[s, b],
                                dtype=fp32,
                            )
    # step 4: all of v
    for kb in nl.affine_range(n_blocks):
        for u in nl.affine_range(SUB):
            v_sb[kb, u, i_p, i_kvd] = nl.load(v[0, SUB * kb + u, i_p, i_kvd], dtype=fp32)
    for r in nl.affine_range(group):
        for c in nl.affine_range(chunks):
            for j in nl.affine_range(kv_per_chunk):
                for t in nl.affine_range(n_tiles):
                    # step 5
                    neg_max[r, c, j, t, i_p, 0] = nisa.tensor_scalar(
                        data=row_max[c, j, r, t, i_p, 0],
                        op0=nl.maximum,
                        operand0=fp32(FP32_LOWEST),
                        op1=nl.multiply,
                        operand1=fp32(-1.0),
                        dtype=fp32,
                        engine=nisa.unknown_engine,
                    )
                    # step 6
                    for s in nl.affine_range(K_PASSES):
                        for b in nl.affine_range(blocks):
                            exps[t, c, j, r, s, b, i_p, i_blk] = nisa.activation(
                                op=nl.exp,
                                data=scores[t, c, j, r, s, b, i_p, i_blk],
                                bias=neg_max[r, c, j, t, i_p, 0],
                                scale=1.0,
                                dtype=fp32,
                            )
                            part_sum[r, c, j, t, s, b, i_p, 0] = nisa.tensor_reduce(
                                nl.add,
                                data=exps[t, c, j, r, s, b, i_p, i_blk],
                                axis=[1],
                                dtype=fp32,
                            )
                            row_sum[c, j, r, t, i_p, 0] = nl.loop_reduce(
                                part_sum[r, c, j, t, s, b, i_p, 0],
                                op=np.add,
                                loop_indices=[b, s],
                                dtype=fp32,
                            )
                    # step 7
                    inv_sum[c, j, r, t, i_p, 0] = nisa.reciprocal(
                        data=row_sum[c, j, r, t, i_p, 0], dtype=fp32
                    )
                    # step 8: probabilities, transposed to keys-on-partitions
                    for s in nl.affine_range(K_PASSES):
                        for b in nl.affine_range(blocks):
                            kb = blocks * s + b
                            probs[t, c, j, r, kb, i_p, i_blk] = nisa.tensor_scalar(
                                data=exps[t, c, j, r, s, b, i_p, i_blk],
                                op0=nl.multiply,
                                operand0=inv_sum[c, j, r, t, i_p, 0],
                                dtype=fp32,
                                engine=nisa.unknown_engine,
                            )
                            for u in nl.affine_range(SUB):
                                probs_t_psum[r, c, j, t, s, b, u, i_p, i_pf] = nisa.nc_matmul(
                                    probs[t, c, j, r, kb, i_p, P * u + i_pf],
                                    identity[i_p, i_pf],
                                    is_moving_onezero=True,
                                    is_transpose=True,
                                )
                                probs_t[kb, u, c, j, r, t, i_p, i_pf] = nl.copy(
                                    probs_t_psum[r, c, j, t, s, b, u, i_p, i_pf], dtype=fp32
                                )
                    # step 9: probabilities @ v, accumulated over every key tile
                    for kb in nl.affine_range(n_blocks):
                        for u in nl.affine_range(SUB):
                            out_psum[r, c, j, t, i_p, i_df] += nisa.nc_matmul(
                                probs_t[kb, u, c, j, r, t, i_p, i_pf],
                                v_sb[kb, u, i_p, d * j + kv_per_chunk * d * c + i_df],
                            )
                    out_sb[c, j, r, t, i_p, i_df] = nl.copy(
                        out_psum[r, c, j, t, i_p, i_df], dtype=fp32
                    )
                    nl.store(
                        out[0, j + kv_per_chunk * c, r, t, i_p, i_df],
                        value=out_sb[c, j, r, t, i_p, i_df],
                    )
    return out


def reference(q, k, v):
    """float64 numpy GQA on the kernel's arguments, in the kernel's output layout
    [1, KH, G, N / 128, 128, D]."""
    n_tiles, p, q_heads, d = q.shape
    kv_heads = k.shape[4]
    n = n_tiles * p
    group = q_heads // kv_heads
    xq = q.astype(np.float64).reshape(n, q_heads, d).transpose(1, 0, 2)  # [QH, N, D]
    xk = k.astype(np.float64).reshape(n, kv_heads, d).transpose(1, 0, 2)  # [KH, N, D]
    xv = v.astype(np.float64).reshape(n, kv_heads, d).transpose(1, 0, 2)
    xk, xv = np.repeat(xk, group, axis=0), np.repeat(xv, group, axis=0)  # head h -> h // G
    scores = xq @ xk.transpose(0, 2, 1) / np.sqrt(d)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    out = (e / e.sum(axis=-1, keepdims=True)) @ xv  # [QH, N, D]
    return out.reshape(1, kv_heads, group, n_tiles, p, d)


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    n, q_heads, kv_heads, d = 1024, 4, 2, 128
    q = rng.standard_normal((n // P, P, q_heads, d)).astype(np.float32)
    k = rng.standard_normal((1, n // KEY_BLOCK, SUB, P, kv_heads, d)).astype(np.float32)
    v = rng.standard_normal((1, n // P, P, kv_heads * d)).astype(np.float32)
    got = gqa(q, k, v, seed_reductions=True)
    np.testing.assert_allclose(got, reference(q, k, v), rtol=0, atol=1e-6)
    print("gqa: ok")
