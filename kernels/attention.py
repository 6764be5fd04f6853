"""Single-head attention forward, flash style (online softmax over key blocks), and reference.

Layer: kernel library (trnsim.kernels); written against the public NKI API only.
"""

from __future__ import annotations

import math

import numpy as np

from trnsim.errors import ConstraintError
from trnsim.nki import isa as nisa
from trnsim.nki import jit
from trnsim.nki import language as nl
from trnsim.program import capture_location

P_MAX = 128  # partitions per tile (pmax)
Q_TILE = 128  # queries per tile: score rows on partitions (gemm_stationary_fmax)
KV_BLOCK = 512  # keys per online-softmax block: 512 fp32 scores fill one PSUM bank
K_TILE = 128  # keys per P @ V matmul: the contraction runs over partitions (pmax)
LOAD_KEYS = 2048  # columns per Q/K load DMA: 4 KiB per partition in bf16 (>= 2 KiB DMAs)
OUT_GROUP_BYTES = 2048  # bytes per partition gathered before an output store DMA
FP32_MIN = -3.4028235e38  # masked score: exp(scale * (FP32_MIN - max)) underflows to exactly 0
DTYPES = ("bfloat16", "float16")  # 16-bit P and V keep the P @ V matmul at full rate
SBUF_SHARE = 0.6  # share of usable SBUF for the resident Q, K and V


def _fail(msg: str) -> None:
    raise ConstraintError(msg, capture_location())


def _check_operands(q, k, v) -> tuple[int, int]:
    """(d, S) of a valid call; raises ConstraintError naming the bad operand otherwise."""
    if len(q.shape) != 2 or len(k.shape) != 2 or len(v.shape) != 2:
        _fail(f"attention: q, k, v must be 2-D, got {list(q.shape)}, {list(k.shape)}, "
              f"{list(v.shape)}")
    d, s = q.shape
    if tuple(k.shape) != (d, s) or tuple(v.shape) != (s, d):
        _fail(f"attention: expected q [d, S], k [d, S], v [S, d]; got q {list(q.shape)}, "
              f"k {list(k.shape)}, v {list(v.shape)}")
    if not 1 <= d <= P_MAX:
        _fail(f"attention: head dimension d={d} must be in [1, {P_MAX}] (it is the "
              f"contraction of Q K^T, on partitions)")
    if s % Q_TILE:
        _fail(f"attention: sequence length S={s} is not a multiple of {Q_TILE}; pad it")
    if not (q.dtype == k.dtype == v.dtype) or q.dtype not in DTYPES:
        _fail(f"attention: dtypes are q {q.dtype}, k {k.dtype}, v {v.dtype}; all three must "
              f"be the same one of {', '.join(DTYPES)}")
    resident = 3 * s * q.dtype.itemsize  # Q and K rows of S, V as S/128 tiles of d <= 128
    budget = nl.tile_size.total_available_sbuf_size * SBUF_SHARE
    if resident > budget:
        _fail(f"attention: S={s} needs {resident} bytes per partition for the resident Q, K "
              f"and V; at most {int(budget)} fit (S <= {int(budget) // (3 * q.dtype.itemsize)}"
              f" here)")
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
        nisa.dma_copy(dst=k_sb[:, c0:c0 + w], src=k[:, c0:c0 + w])
        nisa.dma_copy(dst=q_sb[:, c0:c0 + w], src=q[:, c0:c0 + w])
        # Key c0 + t*128 + p goes to partition p, tile t: d contiguous elements per row.
        v_rows = v[c0:c0 + w, :].reshape((w // K_TILE, K_TILE, d)).permute((1, 0, 2))
        nisa.dma_copy(dst=v_sb[:, c0 // K_TILE:(c0 + w) // K_TILE, :], src=v_rows)
    return q_sb, k_sb, v_sb


def _scores(q_tile, k_sb, k0: int, kw: int, q0: int, causal: bool):
    """Raw scores q_tile.T @ K[:, k0:k0+kw] (fp32), causally masked when the block needs it."""
    s_ps = nl.ndarray((Q_TILE, kw), dtype=nl.float32, buffer=nl.psum, name="scores")
    nisa.nc_matmul(dst=s_ps, stationary=q_tile, moving=k_sb[:, k0:k0 + kw])
    if not causal or k0 + kw - 1 <= q0:
        return s_ps  # no key of this block is later than any query of the tile
    # GpSimd cannot read PSUM: copy out, then keep key k0 + j for query q0 + p iff
    # (q0 - k0) + p - j >= 0.
    s_sb = nl.ndarray((Q_TILE, kw), dtype=nl.float32, buffer=nl.sbuf, name="scores_masked")
    nisa.tensor_copy(dst=s_sb, src=s_ps)
    nisa.affine_select(dst=s_sb, pattern=[[-1, kw]], offset=q0 - k0, channel_multiplier=1,
                       on_true_tile=s_sb, on_false_value=FP32_MIN, cmp_op=nl.greater_equal)
    return s_sb


def _pv(p_sb, v_sb, k0: int, kw: int, d: int):
    """P @ V for one key block: P^T tiles by TensorE transposes, then matmuls into PSUM."""
    n_tiles = kw // K_TILE
    pt_ps = nl.ndarray((K_TILE, n_tiles, Q_TILE), dtype=p_sb.dtype, buffer=nl.psum, name="pT_ps")
    for t in nl.affine_range(n_tiles):
        nisa.nc_transpose(dst=pt_ps[:, t, :], data=p_sb[:, t * K_TILE:(t + 1) * K_TILE],
                          engine=nisa.engine.tensor)
    pt_sb = nl.ndarray((K_TILE, n_tiles, Q_TILE), dtype=p_sb.dtype, buffer=nl.sbuf, name="pT")
    nisa.tensor_copy(dst=pt_sb, src=pt_ps)
    pv_ps = nl.ndarray((Q_TILE, d), dtype=nl.float32, buffer=nl.psum, name="pv")
    for t in nl.affine_range(n_tiles):
        nisa.nc_matmul(dst=pv_ps, stationary=pt_sb[:, t, :], moving=v_sb[:, k0 // K_TILE + t, :],
                       accumulate=t > 0)
    return pv_ps


@jit
def attention(q, k, v, scale=None, causal=False):
    """Single-head attention ``softmax(scale * Q K^T [+ causal mask]) V``, flash style.

    Q, K and V stay resident in SBUF (loaded once with >= 2 KiB DMAs). For each tile of 128
    queries the kernel walks the keys in blocks of 512 with an online softmax: the score
    block ``Q_tile^T K_block`` lands in one PSUM bank (TensorE); VectorE takes its row max
    and the new running max m; ScalarE computes ``P = exp(scale*s - scale*m)`` (bf16) with the
    row sums in its accumulator in the same instruction, and the correction
    ``alpha = exp(scale*(m_old - m))``; TensorE transposes P in 128-key tiles and multiplies
    ``P^T`` tiles by V tiles into PSUM; VectorE rescales the running output and sum by alpha
    and adds the new block (one fused scalar_tensor_tensor each). A final reciprocal of the
    row sums normalizes the output.

    Dimensions:
        d: head dimension, 1..128 (the Q K^T contraction, on partitions).
        S: sequence length, multiple of 128 (up to ~20k in bf16 on trn3 for resident Q/K/V).

    Args:
        q: [d, S] HBM tensor, bfloat16 or float16 (queries, transposed).
        k: [d, S] HBM tensor, same dtype (keys, transposed).
        v: [S, d] HBM tensor, same dtype.
        scale: score scale; default 1/sqrt(d).
        causal: mask keys later than the query (key j visible to query i iff j <= i).

    Returns:
        [S, d] shared-HBM tensor of the input dtype.

    Notes:
        The causal mask is applied with nisa.affine_select (GpSimd) only on the blocks that
        cross the diagonal; blocks entirely in the future are skipped. Masked scores are
        FP32_MIN, so exp underflows to exactly 0 and no inf arithmetic happens. P is rounded
        to the input dtype for the P @ V matmul while the row sums use the fp32 values.

    Pseudocode:
        for each query tile (128 rows):
          m, l, o = -inf, 0, 0
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
    dtype = q.dtype
    out = nl.ndarray((s, d), dtype=dtype, buffer=nl.shared_hbm, name="attn_out")
    q_sb, k_sb, v_sb = _load_resident(q, k, v, d, s)
    group = max(1, min(s // Q_TILE, OUT_GROUP_BYTES // (d * dtype.itemsize)))

    for g in nl.affine_range(-(-(s // Q_TILE) // group)):
        g_tiles = min(group, s // Q_TILE - g * group)
        out_sb = nl.ndarray((Q_TILE, g_tiles, d), dtype=dtype, buffer=nl.sbuf, name="out_grp")
        for j in nl.affine_range(g_tiles):
            q0 = (g * group + j) * Q_TILE
            _query_tile(q_sb[:, q0:q0 + Q_TILE], k_sb, v_sb, out_sb[:, j, :], q0, s, d,
                        scale, causal)
        rows = out[g * group * Q_TILE:(g * group + g_tiles) * Q_TILE, :]
        nisa.dma_copy(dst=rows.reshape((g_tiles, Q_TILE, d)).permute((1, 0, 2)), src=out_sb)
    return out


def _query_tile(q_tile, k_sb, v_sb, o_dst, q0: int, s: int, d: int, scale: float,
                causal: bool) -> None:
    """Online softmax over the key blocks for one tile of 128 queries; writes o_dst."""
    kv_end = min(s, q0 + Q_TILE) if causal else s
    m_run = l_run = o_run = None
    for kb in nl.sequential_range(-(-kv_end // KV_BLOCK)):
        k0 = kb * KV_BLOCK
        kw = min(KV_BLOCK, kv_end - k0)
        scores = _scores(q_tile, k_sb, k0, kw, q0, causal)

        m_blk = nl.ndarray((Q_TILE, 1), dtype=nl.float32, buffer=nl.sbuf, name="m_blk")
        nisa.tensor_reduce(dst=m_blk, op=nl.maximum, data=scores, axis=1)
        if m_run is None:
            m_new = m_blk
        else:
            m_new = nl.ndarray((Q_TILE, 1), dtype=nl.float32, buffer=nl.sbuf, name="m_new")
            nisa.tensor_tensor(dst=m_new, data1=m_run, data2=m_blk, op=nl.maximum)
        neg_m = nl.ndarray((Q_TILE, 1), dtype=nl.float32, buffer=nl.sbuf, name="neg_m")
        nisa.tensor_scalar(dst=neg_m, data=m_new, op0=nl.multiply, operand0=-scale)

        # p = exp(scale * s - scale * m_new), row sums into the ScalarE accumulator.
        p_sb = nl.ndarray((Q_TILE, kw), dtype=q_tile.dtype, buffer=nl.sbuf, name="p")
        rowsum = nl.ndarray((Q_TILE, 1), dtype=nl.float32, buffer=nl.sbuf, name="rowsum")
        nisa.activation(dst=p_sb, op=nl.exp, data=scores, bias=neg_m, scale=scale,
                        reduce_op=nl.add, reduce_res=rowsum, reduce_cmd=nisa.reduce_cmd.reset_reduce)
        pv_ps = _pv(p_sb, v_sb, k0, kw, d)

        o_new = nl.ndarray((Q_TILE, d), dtype=nl.float32, buffer=nl.sbuf, name="o_acc")
        if m_run is None:
            l_new = rowsum
            nisa.tensor_copy(dst=o_new, src=pv_ps)
        else:
            alpha = nl.ndarray((Q_TILE, 1), dtype=nl.float32, buffer=nl.sbuf, name="alpha")
            nisa.activation(dst=alpha, op=nl.exp, data=m_run, bias=neg_m, scale=scale)
            l_new = nl.ndarray((Q_TILE, 1), dtype=nl.float32, buffer=nl.sbuf, name="l_run")
            nisa.scalar_tensor_tensor(dst=l_new, data=l_run, op0=nl.multiply, operand0=alpha,
                                      op1=nl.add, operand1=rowsum)
            nisa.scalar_tensor_tensor(dst=o_new, data=o_run, op0=nl.multiply, operand0=alpha,
                                      op1=nl.add, operand1=pv_ps)
        m_run, l_run, o_run = m_new, l_new, o_new

    inv_l = nl.ndarray((Q_TILE, 1), dtype=nl.float32, buffer=nl.sbuf, name="inv_l")
    nisa.reciprocal(dst=inv_l, data=l_run)
    nisa.tensor_scalar(dst=o_dst, data=o_run, op0=nl.multiply, operand0=inv_l)


def attention_ref(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float | None = None,
                  causal: bool = False) -> np.ndarray:
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
