"""Single-head attention forward, flash style (online softmax over key blocks), and reference.

Layer: kernel library (trnsim.kernels); written against the public NKI API only.
"""

from __future__ import annotations

import math

import numpy as np

from trnsim.nki import isa as nisa
from trnsim.nki import jit
from trnsim.nki import language as nl

from ._common import fail, scalar_copy

P_MAX = 128  # partitions per tile (pmax)
Q_TILE = 128  # queries per tile: score rows on partitions (gemm_stationary_fmax)
KV_BLOCK = 512  # keys per online-softmax block: 512 fp32 scores fill one PSUM bank
K_TILE = 128  # keys per P @ V matmul: the contraction runs over partitions (pmax)
PIPE_AHEAD = 2  # key blocks whose scores and softmax are issued before a block's P @ V
Q_GROUP = 4  # query tiles advanced together. PSUM: 4 score banks in a block's first half;
#              4 P^T banks plus one bank shared by the 4 P @ V results in its second half
LOAD_KEYS = 2048  # columns per Q/K load DMA: 4 KiB per partition in bf16 (>= 2 KiB DMAs)
OUT_GROUP_BYTES = 2048  # bytes per partition gathered before an output store DMA
FP32_MIN = -3.4028235e38  # masked score: exp(scale * (FP32_MIN - max)) underflows to exactly 0
DTYPES = ("bfloat16", "float16")  # 16-bit P and V keep the P @ V matmul at full rate
SBUF_SHARE = 0.6  # share of usable SBUF for the resident Q, K and V


def _check_operands(q, k, v) -> tuple[int, int]:
    """(d, S) of a valid call; raises ConstraintError naming the bad operand otherwise."""
    if len(q.shape) != 2 or len(k.shape) != 2 or len(v.shape) != 2:
        fail(
            f"attention: q, k, v must be 2-D, got {list(q.shape)}, {list(k.shape)}, {list(v.shape)}"
        )
    d, s = q.shape
    if tuple(k.shape) != (d, s) or tuple(v.shape) != (s, d):
        fail(
            f"attention: expected q [d, S], k [d, S], v [S, d]; got q {list(q.shape)}, "
            f"k {list(k.shape)}, v {list(v.shape)}"
        )
    if not 1 <= d <= P_MAX:
        fail(
            f"attention: head dimension d={d} must be in [1, {P_MAX}] (it is the "
            f"contraction of Q K^T, on partitions)"
        )
    if s % Q_TILE:
        fail(f"attention: sequence length S={s} is not a multiple of {Q_TILE}; pad it")
    if not (q.dtype == k.dtype == v.dtype) or q.dtype not in DTYPES:
        fail(
            f"attention: dtypes are q {q.dtype}, k {k.dtype}, v {v.dtype}; all three must "
            f"be the same one of {', '.join(DTYPES)}"
        )
    resident = 3 * s * q.dtype.itemsize  # Q and K rows of S, V as S/128 tiles of d <= 128
    budget = nl.tile_size.total_available_sbuf_size * SBUF_SHARE
    if resident > budget:
        fail(
            f"attention: S={s} needs {resident} bytes per partition for the resident Q, K "
            f"and V; at most {int(budget)} fit (S <= {int(budget) // (3 * q.dtype.itemsize)}"
            f" here)"
        )
    return d, s


def _load_resident(q, k, v, d: int, s: int):
    """Q and K as [d, S] and V as [128, S/128, d] (key tile t on column t) in SBUF."""
    dtype = q.dtype
    q_sb = nl.ndarray((d, s), dtype=dtype, buffer=nl.sbuf, name="q_res")
    k_sb = nl.ndarray((d, s), dtype=dtype, buffer=nl.sbuf, name="k_res")
    v_sb = nl.ndarray((K_TILE, s // K_TILE, d), dtype=dtype, buffer=nl.sbuf, name="v_res")
    for c in nl.affine_range(-(-s // LOAD_KEYS)):
        c0 = c * LOAD_KEYS
        w = min(LOAD_KEYS, s - c0)
        nisa.dma_copy(dst=k_sb[:, c0 : c0 + w], src=k[:, c0 : c0 + w])
        nisa.dma_copy(dst=q_sb[:, c0 : c0 + w], src=q[:, c0 : c0 + w])
        # Key c0 + t*128 + p goes to partition p, tile t: d contiguous elements per row.
        v_rows = v[c0 : c0 + w, :].reshape((w // K_TILE, K_TILE, d)).permute((1, 0, 2))
        nisa.dma_copy(dst=v_sb[:, c0 // K_TILE : (c0 + w) // K_TILE, :], src=v_rows)
    return q_sb, k_sb, v_sb


def _scores(q_tile, k_sb, k0: int, kw: int, q0: int, causal: bool):
    """Raw scores q_tile.T @ K[:, k0:k0+kw] (fp32), causally masked when the block needs it."""
    s_ps = nl.ndarray((Q_TILE, kw), dtype=nl.float32, buffer=nl.psum, name="scores")
    nisa.nc_matmul(dst=s_ps, stationary=q_tile, moving=k_sb[:, k0 : k0 + kw])
    if not causal or k0 + kw - 1 <= q0:
        return s_ps  # no key of this block is later than any query of the tile
    # GpSimd cannot read PSUM: copy out, then keep key k0 + j for query q0 + p iff
    # (q0 - k0) + p - j >= 0.
    s_sb = nl.ndarray((Q_TILE, kw), dtype=nl.float32, buffer=nl.sbuf, name="scores_masked")
    nisa.tensor_copy(dst=s_sb, src=s_ps)
    nisa.affine_select(
        dst=s_sb,
        pattern=[[-1, kw]],
        offset=q0 - k0,
        channel_multiplier=1,
        on_true_tile=s_sb,
        on_false_value=FP32_MIN,
        cmp_op=nl.greater_equal,
    )
    return s_sb


class _TileState:
    """Online-softmax state of one query tile: -scale * running max, row sums, output."""

    def __init__(self, q0: int, kv_end: int, o_dst):
        self.q0 = q0
        self.kv_end = kv_end  # keys at or beyond kv_end are never visible to this tile
        self.o_dst = o_dst
        self.neg_max = None  # [128, 1] fp32: -scale * max of the scores so far
        self.l = None  # [128, 1] fp32: sum of exp(scale * (s - max)) so far
        self.o = None  # [128, d] fp32: unnormalized output so far


def _block_front(
    tiles: list[_TileState], q_sb, k_sb, k0: int, scale: float, causal: bool, dtype
) -> list[tuple]:
    """First half of a 512-key block for a group of query tiles: scores, running max, P and
    the row sums (the running sum is updated here). Returns what the second half needs.

    Stage by stage across the group, so the in-order engines overlap one tile's work with
    another's."""
    live = [t for t in tiles if k0 < t.kv_end]
    widths = [min(KV_BLOCK, t.kv_end - k0) for t in live]
    scores = [
        _scores(q_sb[:, t.q0 : t.q0 + Q_TILE], k_sb, k0, kw, t.q0, causal)
        for t, kw in zip(live, widths, strict=True)
    ]
    # Each engine's queue is in order: issue every tile's instance of a step before any
    # step that depends on it, so a dependent instruction never blocks an independent one.
    m_blks = []
    for sc in scores:
        m_blk = nl.ndarray((Q_TILE, 1), dtype=nl.float32, buffer=nl.sbuf, name="m_blk")
        nisa.tensor_reduce(dst=m_blk, op=nl.maximum, data=sc, axis=1)
        m_blks.append(m_blk)
    neg_max = []
    for t, m_blk in zip(live, m_blks, strict=True):
        nm = nl.ndarray((Q_TILE, 1), dtype=nl.float32, buffer=nl.sbuf, name="neg_max")
        # -scale * max(m_old, m_blk) = min(-scale * m_old, -scale * m_blk) as scale > 0.
        if t.neg_max is None:
            nisa.tensor_scalar(dst=nm, data=m_blk, op0=nl.multiply, operand0=-scale)
        else:
            nisa.tensor_scalar(
                dst=nm,
                data=m_blk,
                op0=nl.multiply,
                operand0=-scale,
                op1=nl.minimum,
                operand1=t.neg_max,
            )
        neg_max.append(nm)
    probs, sums = [], []
    for sc, nm, kw in zip(scores, neg_max, widths, strict=True):
        # p = exp(scale * s - scale * m_new), the row sums into the ScalarE accumulator.
        p_sb = nl.ndarray((Q_TILE, kw), dtype=dtype, buffer=nl.sbuf, name="p")
        rowsum = nl.ndarray((Q_TILE, 1), dtype=nl.float32, buffer=nl.sbuf, name="rowsum")
        nisa.activation(
            dst=p_sb,
            op=nl.exp,
            data=sc,
            bias=nm,
            scale=scale,
            reduce_op=nl.add,
            reduce_res=rowsum,
            reduce_cmd=nisa.reduce_cmd.reset_reduce,
        )
        probs.append(p_sb)
        sums.append(rowsum)
    alphas = []
    for t, nm in zip(live, neg_max, strict=True):
        alpha = None
        if t.neg_max is not None:  # alpha = exp(scale * (m_old - m_new)), on ScalarE
            alpha = nl.ndarray((Q_TILE, 1), dtype=nl.float32, buffer=nl.sbuf, name="alpha")
            nisa.activation(dst=alpha, op=nl.exp, data=t.neg_max, bias=nm, scale=-1.0)
        alphas.append(alpha)
    pending = []
    for t, nm, p_sb, rowsum, alpha, kw in zip(
        live, neg_max, probs, sums, alphas, widths, strict=True
    ):
        if alpha is None:
            t.l = rowsum
        else:
            # l = l * alpha + rowsum on ScalarE (a copy with per-row scale and bias): VectorE
            # is the busier engine.
            l_new = nl.ndarray((Q_TILE, 1), dtype=nl.float32, buffer=nl.sbuf, name="l_run")
            nisa.activation(dst=l_new, op=nl.copy, data=t.l, scale=alpha, bias=rowsum)
            t.l = l_new
        t.neg_max = nm
        pending.append((t, p_sb, alpha, kw))
    return pending


def _block_back(pending: list[tuple], v_sb, k0: int, d: int) -> None:
    """Second half of a key block: P^T by TensorE transposes, P @ V, o = o * alpha + P @ V."""
    p_t = [_transpose_probs(p_sb, kw) for _, p_sb, _, kw in pending]
    # One PSUM bank holds the group's P @ V results (Q_GROUP * d * 4 <= 2048 bytes).
    pv_ps = nl.ndarray((Q_TILE, len(pending), d), dtype=nl.float32, buffer=nl.psum, name="pv")
    for i, (pt, (_, _, _, kw)) in enumerate(zip(p_t, pending, strict=True)):
        for t in nl.affine_range(kw // K_TILE):
            nisa.nc_matmul(
                dst=pv_ps[:, i, :],
                stationary=pt[:, t, :],
                moving=v_sb[:, k0 // K_TILE + t, :],
                accumulate=t > 0,
            )
    for i, (t, _, alpha, _) in enumerate(pending):
        pv = pv_ps[:, i, :]
        o_new = nl.ndarray((Q_TILE, d), dtype=nl.float32, buffer=nl.sbuf, name="o_acc")
        if alpha is None:
            nisa.tensor_copy(dst=o_new, src=pv)
        else:
            nisa.scalar_tensor_tensor(
                dst=o_new, data=t.o, op0=nl.multiply, operand0=alpha, op1=nl.add, operand1=pv
            )
        t.o = o_new


def _transpose_probs(p_sb, kw: int):
    """P^T for one key block as [128 keys, kw/128, 128 queries] in SBUF (TensorE transposes)."""
    n_tiles = kw // K_TILE
    pt_ps = nl.ndarray((K_TILE, n_tiles, Q_TILE), dtype=p_sb.dtype, buffer=nl.psum, name="pT_ps")
    for t in nl.affine_range(n_tiles):
        nisa.nc_transpose(
            dst=pt_ps[:, t, :],
            data=p_sb[:, t * K_TILE : (t + 1) * K_TILE],
            engine=nisa.engine.tensor,
        )
    pt_sb = nl.ndarray((K_TILE, n_tiles, Q_TILE), dtype=p_sb.dtype, buffer=nl.sbuf, name="pT")
    # Evacuated by ScalarE: VectorE already carries the row maxima and the output update.
    scalar_copy(pt_sb, pt_ps)
    return pt_sb


@jit
def attention(q, k, v, scale=None, causal=False):
    """Single-head attention ``softmax(scale * Q K^T [+ causal mask]) V``, flash style.

    Q, K and V stay resident in SBUF (loaded once with >= 2 KiB DMAs). Query tiles of 128
    rows are processed four at a time; for each group the kernel walks the keys in blocks
    of 512 with an online softmax: the score block ``Q_tile^T K_block`` lands in one PSUM bank
    (TensorE); VectorE takes its row max and folds it into the running ``-scale * max``
    (one tensor_scalar); ScalarE computes ``P = exp(scale*s - scale*max)`` (bf16) with the
    row sums in its accumulator in the same instruction, and the correction
    ``alpha = exp(scale*(m_old - m_new))``; TensorE transposes P in 128-key tiles and
    multiplies the ``P^T`` tiles by the V tiles into PSUM; VectorE rescales the running
    output and sum by alpha and adds the new block (one fused scalar_tensor_tensor each).
    The tiles of a group advance stage by stage, and the scores and softmax of a key block
    are issued two blocks ahead of its P @ V (software pipelining), so each in-order engine
    queue has independent work while it waits on a dependency. A final reciprocal of the
    row sums normalizes the output.

    Dimensions:
        d: head dimension, 1..128 (the Q K^T contraction, on partitions).
        S: sequence length, multiple of 128 (resident Q, K, V: up to 24448 in bf16 on trn3).

    Args:
        q: [d, S] HBM tensor, bfloat16 or float16 (queries, transposed).
        k: [d, S] HBM tensor, same dtype (keys, transposed).
        v: [S, d] HBM tensor, same dtype.
        scale: positive score scale; default 1/sqrt(d).
        causal: mask keys later than the query (key j visible to query i iff j <= i).

    Returns:
        [S, d] shared-HBM tensor of the input dtype.

    Notes:
        The causal mask is applied with nisa.affine_select (GpSimd) only on the blocks that
        cross the diagonal; blocks entirely in the future are skipped. Masked scores are
        FP32_MIN, so exp underflows to exactly 0 and no inf arithmetic happens. P is rounded
        to the input dtype for the P @ V matmul while the row sums use the fp32 values.

    Pseudocode:
        for each group of 4 query tiles (128 rows each):
          m, l, o = -inf, 0, 0                            (per tile)
          for each key block (512) not in the future:
            s = q_tile.T @ k_block                  (PSUM, fp32; masked if on the diagonal)
            m_new = max(m, rowmax(s)); alpha = exp(scale * (m - m_new))
            p = exp(scale * s - scale * m_new); rowsum = sum(p)
            l = l * alpha + rowsum;  o = o * alpha + p @ v_block
            m = m_new
          out[tile] = o / l
    """
    d, s = _check_operands(q, k, v)
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    if not scale > 0:
        fail(f"attention: scale={scale} must be positive (the running max is kept scaled)")
    dtype = q.dtype
    out = nl.ndarray((s, d), dtype=dtype, buffer=nl.shared_hbm, name="attn_out")
    q_sb, k_sb, v_sb = _load_resident(q, k, v, d, s)
    n_q = s // Q_TILE
    group = max(1, min(n_q, OUT_GROUP_BYTES // (d * dtype.itemsize)))

    for g in nl.affine_range(-(-n_q // group)):
        g_tiles = min(group, n_q - g * group)
        out_sb = nl.ndarray((Q_TILE, g_tiles, d), dtype=dtype, buffer=nl.sbuf, name="out_grp")
        for j0 in nl.affine_range(-(-g_tiles // Q_GROUP)):
            tiles = []
            for j in range(j0 * Q_GROUP, min(g_tiles, (j0 + 1) * Q_GROUP)):
                q0 = (g * group + j) * Q_TILE
                kv_end = min(s, q0 + Q_TILE) if causal else s
                tiles.append(_TileState(q0, kv_end, out_sb[:, j, :]))
            n_blocks = -(-max(t.kv_end for t in tiles) // KV_BLOCK)
            # Software pipeline: the first halves (scores, softmax) run PIPE_AHEAD key blocks
            # ahead of the second halves (P @ V), so the in-order engine queues interleave
            # independent blocks instead of waiting on one block's chain.
            fronts = []
            for kb in nl.sequential_range(n_blocks):  # the softmax state carries over
                while len(fronts) <= PIPE_AHEAD and kb + len(fronts) < n_blocks:
                    fronts.append(
                        _block_front(
                            tiles, q_sb, k_sb, (kb + len(fronts)) * KV_BLOCK, scale, causal, dtype
                        )
                    )
                _block_back(fronts.pop(0), v_sb, kb * KV_BLOCK, d)
            for t in tiles:
                inv_l = nl.ndarray((Q_TILE, 1), dtype=nl.float32, buffer=nl.sbuf, name="inv_l")
                nisa.reciprocal(dst=inv_l, data=t.l)
                nisa.tensor_scalar(dst=t.o_dst, data=t.o, op0=nl.multiply, operand0=inv_l)
        rows = out[g * group * Q_TILE : (g * group + g_tiles) * Q_TILE, :]
        nisa.dma_copy(dst=rows.reshape((g_tiles, Q_TILE, d)).permute((1, 0, 2)), src=out_sb)
    return out


def attention_ref(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float | None = None, causal: bool = False
) -> np.ndarray:
    """Attention in float64 from the same layouts: q, k [d, S], v [S, d] -> [S, d]."""
    q64, k64, v64 = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    d, s = q64.shape
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    logits = scale * (q64.T @ k64)
    if causal:
        logits = np.where(np.tril(np.ones((s, s), dtype=bool)), logits, -np.inf)
    logits -= logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    return (p / p.sum(axis=1, keepdims=True)) @ v64
