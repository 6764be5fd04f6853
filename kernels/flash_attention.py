"""Flash attention device kernels for the PyTorch device (SDPA): forward with log-sum-exp,
backward, and their float64 references.

Layer: kernel library (trnsim.kernels); public NKI API only. Follows docs/device-kernels.md.
The forward walks key blocks of 512 with an online softmax as kernels/attention.py does, for
any Sq, Skv (ragged tiles), GQA, causal masks and bool/additive attention masks; the backward
(kernels/_flash_backward.py) recomputes the probabilities from the log-sum-exp.
"""

from __future__ import annotations

import math

import numpy as np

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

from ._common import fail
from ._flash_backward import backward_group
from ._flash_scores import (
    FP32_MAX,
    K_BLOCK,
    K_TILE,
    Q_TILE,
    Masking,
    MaskSpec,
    broadcast_strides,
    head_mat,
    load_rows,
    load_transposed,
    transpose_probs,
)
from ._kmajor import Mat, store_rows

PIPE_AHEAD = 2  # key blocks whose scores and softmax are issued before a block's P @ V
Q_GROUP = 4  # query tiles advanced together (4 P @ V results share one PSUM bank at D=128)
OUT_GROUP_BYTES = 2048  # bytes per partition of output rows gathered before a store DMA
DTYPES = ("float32", "bfloat16", "float16")
D_MAX = 128  # head dim: the Q K^T contraction runs over partitions
RESIDENT_SHARE = 0.6  # share of usable SBUF for the resident K^T, V and Q^T of a head


def flash_attention(out, lse, q, k, v, *, scale: float, causal: bool, attn_mask=None) -> None:
    """``out = softmax(scale * q k^T + mask) v`` per head, and ``lse`` = its log-sum-exp.

    Per (batch, kv head), K^T (D on partitions) and V (keys on partitions) stay resident in
    SBUF for the query heads that share them (GQA); Q^T is loaded per group of query tiles.
    Query tiles
    of 128 rows advance four at a time over key blocks of 512: the score block lands in one
    PSUM bank (TensorE); it is masked (affine_select on GpSimd for the blocks crossing the
    causal diagonal; select_reduce / scalar_tensor_tensor on VectorE for bool / additive
    masks, fused with the row max); ScalarE computes P = exp(scale * s - m) with the row sums
    in its accumulator, and the rescale factors; TensorE transposes P and multiplies by V.

    Dimensions:
        q: [B, H, Sq, D]; k, v: [B, Hkv, Skv, D] with H a multiple of Hkv; D <= 128.
        Any Sq, Skv >= 1 (partial tiles at the edges).

    Args:
        out: [B, H, Sq, D] HBM tensor (float32, bfloat16 or float16).
        lse: [B, H, Sq] float32 HBM tensor: log-sum-exp of the scaled, masked scores.
        q, k, v: HBM tensors of one dtype (float32, bfloat16, float16); any strides.
        scale: score scale (torch's default is 1/sqrt(D); the backend passes it).
        causal: PyTorch SDPA's is_causal: key j is visible to query i iff j <= i (top-left
            aligned tril, also when Sq != Skv).
        attn_mask: optional bool (True = keep) or float (added to the scaled scores) tensor
            broadcastable to [B, H, Sq, Skv] (stride 0 where broadcast).

    Notes:
        A row whose keys are all masked gives out = 0 and lse = 0 (torch 2.13 CPU: the math
        path returns 0 and the flash path also lse 0); finite masks (e.g. finfo.min) are
        ordinary values. P is rounded to the input dtype for the P @ V matmul; statistics are
        fp32. Resident SBUF per kv head: Skv * itemsize (K^T) + Skv / 128 * D * itemsize (V)
        bytes per partition, plus one group of Q^T, must fit in 60% of SBUF (Skv <= ~18K in
        bf16 at D = 128 on trn1, ~24K on trn3).
    """
    dims = check_attention("flash_attention", out, q, k, v, scale, attn_mask, lse=lse)
    b_n, h_n, hkv, sq, skv, d = dims
    spec = mask_spec("flash_attention", attn_mask, (b_n, h_n, sq, skv))
    group = h_n // hkv
    for b in range(b_n):
        for g in range(hkv):
            k_t = load_transposed(head_mat(k, b, g, skv, d), "k_res")
            v_sb = load_rows(head_mat(v, b, g, skv, d), "v_res")
            for h in range(g * group, (g + 1) * group):
                mask = None if spec is None else spec.head(b, h, sq, skv)
                masking = Masking(float(scale), bool(causal), mask, attn_kind(attn_mask))
                _forward_head(head_mat(out, b, h, sq, d), _lse_mat(lse, b, h, sq),
                              head_mat(q, b, h, sq, d), k_t, v_sb, masking, skv)


def flash_attention_backward(dq, dk, dv, grad_out, q, k, v, out, lse, *, scale: float,
                             causal: bool, attn_mask=None) -> None:
    """Gradients of flash_attention: dq [B, H, Sq, D], dk and dv [B, Hkv, Skv, D].

    Recomputes P = exp(scale * q k^T + mask - lse) per (query tile, key block) and forms
    dV += P^T dO, dP = dO V^T, dS = P * (dP - rowsum(dO * O)), dQ += scale * dS K,
    dK += scale * dS^T Q (FlashAttention-2). Key blocks are the outer loop so dK and dV of a
    block accumulate in PSUM over the query tiles; dQ accumulates in SBUF (fp32); with GQA
    dK and dV sum over the query heads of their kv head in SBUF (fp32).

    Args:
        dq, dk, dv: outputs, shaped as q, k, v (any float dtype of DTYPES).
        grad_out, out: [B, H, Sq, D]; lse: [B, H, Sq] float32 from the forward.
        q, k, v, scale, causal, attn_mask: as for flash_attention.

    Notes:
        P and dS are rounded to the input dtype for their matmuls (as FlashAttention does);
        the row statistics and all accumulators are fp32. Resident SBUF: per kv head
        K^T, K and V^T; per query head Q^T, Q, dO, dO^T and the fp32 dQ accumulator (plus
        the fp32 dK, dV accumulators with GQA).
    """
    dims = check_attention("flash_attention_backward", out, q, k, v, scale, attn_mask, lse=lse,
                           grads=(dq, dk, dv, grad_out))
    b_n, h_n, hkv, sq, skv, d = dims
    spec = mask_spec("flash_attention_backward", attn_mask, (b_n, h_n, sq, skv))
    group = h_n // hkv
    kind = attn_kind(attn_mask)
    for b in range(b_n):
        for g in range(hkv):
            heads = []
            for h in range(g * group, (g + 1) * group):
                mask = None if spec is None else spec.head(b, h, sq, skv)
                heads.append({
                    "q": head_mat(q, b, h, sq, d), "do": head_mat(grad_out, b, h, sq, d),
                    "o": head_mat(out, b, h, sq, d), "lse": _lse_mat(lse, b, h, sq),
                    "dq": head_mat(dq, b, h, sq, d),
                    "masking": Masking(float(scale), bool(causal), mask, kind),
                })
            backward_group(heads, head_mat(k, b, g, skv, d), head_mat(v, b, g, skv, d),
                           head_mat(dk, b, g, skv, d), head_mat(dv, b, g, skv, d),
                           float(scale))


# ---------------------------------------------------------------- checks


def check_attention(what, out, q, k, v, scale, attn_mask, lse=None, grads=()):
    """(B, H, Hkv, Sq, Skv, D) of a valid call; fail() naming the bad operand otherwise."""
    for name, t in (("q", q), ("k", k), ("v", v), ("out", out)):
        if len(t.shape) != 4:
            fail(f"{what}: {name} must be 4-D [B, heads, seq, D], got {list(t.shape)}")
    b_n, h_n, sq, d = (int(s) for s in q.shape)
    bk, hkv, skv, dk = (int(s) for s in k.shape)
    if bk != b_n or dk != d or tuple(v.shape) != tuple(k.shape):
        fail(f"{what}: k and v must be [B={b_n}, Hkv, Skv, D={d}] alike; got k "
             f"{list(k.shape)}, v {list(v.shape)}")
    if skv < 1 or d < 1:
        fail(f"{what}: Skv={skv} and D={d} must be >= 1 (no keys: the output is undefined)")
    if hkv < 1 or h_n % hkv:
        fail(f"{what}: q has H={h_n} heads, k/v Hkv={hkv}; H must be a multiple of Hkv (GQA)")
    if d > D_MAX:
        fail(f"{what}: head dim D={d} exceeds {D_MAX} (the Q K^T contraction runs over the "
             f"128 partitions); split the head dim on the host")
    if tuple(out.shape) != tuple(q.shape):
        fail(f"{what}: out has shape {list(out.shape)}, q {list(q.shape)}; they must match")
    if lse is not None and tuple(lse.shape) != (b_n, h_n, sq):
        fail(f"{what}: lse has shape {list(lse.shape)}; expected [B, H, Sq] = "
             f"{[b_n, h_n, sq]}")
    if lse is not None and lse.dtype.name != "float32":
        fail(f"{what}: lse has dtype {lse.dtype.name}; it must be float32")
    if not (q.dtype == k.dtype == v.dtype) or q.dtype.name not in DTYPES:
        fail(f"{what}: q, k, v have dtypes {q.dtype.name}, {k.dtype.name}, {v.dtype.name}; "
             f"they must be one of {', '.join(DTYPES)}")
    for name, t in (("out", out), *zip(("dq", "dk", "dv", "grad_out"), grads, strict=False)):
        if t.dtype.name not in DTYPES:
            fail(f"{what}: {name} has dtype {t.dtype.name}; allowed: {', '.join(DTYPES)}")
    for name, t, want in zip(("dq", "dk", "dv", "grad_out"), grads,
                             (q.shape, k.shape, k.shape, q.shape), strict=False):
        if tuple(t.shape) != tuple(want):
            fail(f"{what}: {name} has shape {list(t.shape)}; expected {list(want)}")
    if not isinstance(scale, (int, float)) or isinstance(scale, bool) or not math.isfinite(scale):
        fail(f"{what}: scale={scale!r} must be a finite Python number")
    if attn_mask is not None and not (attn_mask.dtype.name == "bool"
                                      or attn_mask.dtype.name in DTYPES):
        fail(f"{what}: attn_mask has dtype {attn_mask.dtype.name}; allowed: bool (True keeps) "
             f"or {', '.join(DTYPES)} (added to the scores)")
    isz = q.dtype.itemsize
    q_rows = _per_store(-(-sq // Q_TILE), d, out.dtype.itemsize) * Q_TILE
    resident = (skv + min(sq, q_rows)) * isz + -(-skv // K_TILE) * d * isz
    budget = nl.tile_size.total_available_sbuf_size * RESIDENT_SHARE
    if not grads and resident > budget:
        fail(f"{what}: Skv={skv} needs {resident} bytes per partition for the resident K^T and "
             f"V of a kv head (and one group of Q^T); at most {int(budget)} fit")
    return b_n, h_n, hkv, sq, skv, d


def attn_kind(attn_mask) -> str | None:
    if attn_mask is None:
        return None
    return "bool" if attn_mask.dtype.name == "bool" else "float"


def mask_spec(what: str, attn_mask, shape) -> MaskSpec | None:
    if attn_mask is None:
        return None
    st = broadcast_strides("attn_mask", attn_mask, shape, what)
    return MaskSpec(attn_kind(attn_mask), attn_mask, tuple(st))


def _lse_mat(lse, b: int, h: int, sq: int) -> Mat:
    """lse[b, h, :] as an [Sq, 1] matrix."""
    st = [int(s) for s in lse.strides]
    return Mat(lse, sq, 1, st[2], 1, int(lse.offset) + b * st[0] + h * st[1])


# ---------------------------------------------------------------- forward


class _TileState:
    """Online-softmax state of one query tile: -running max (domain units), row sums, output."""

    def __init__(self, q0: int, mq: int, kv_end: int, slot: int):
        self.q0, self.mq, self.kv_end, self.slot = q0, mq, kv_end, slot
        self.neg_max = None  # [128, 1] fp32: -xs * max of the scores so far (clamped finite)
        self.l = None  # [128, 1] fp32: sum of exp(xs * x - max) so far
        self.o = None  # [128, D] fp32: unnormalized output so far


def _forward_head(out_m: Mat, lse_m: Mat, q_m: Mat, k_t, v_sb, masking: Masking, skv: int):
    sq, d = q_m.rows, q_m.cols
    n_q = -(-sq // Q_TILE)
    per_store = _per_store(n_q, d, out_m.t.dtype.itemsize)
    for gi in nl.affine_range(-(-n_q // per_store)):
        t0 = gi * per_store
        g_tiles = min(per_store, n_q - t0)
        r0 = t0 * Q_TILE
        rows = min(sq, (t0 + g_tiles) * Q_TILE) - r0
        # Q^T of this group's query rows (D on partitions): the stationaries of its scores.
        q_t = load_transposed(Mat(q_m.t, rows, d, q_m.rs, q_m.cs, q_m.at(r0, 0)), "q_grp")
        out_sb = nl.ndarray((Q_TILE, g_tiles, d), dtype=out_m.t.dtype, buffer=nl.sbuf,
                            name="attn_out")
        lse_sb = nl.ndarray((Q_TILE, g_tiles, 1), dtype=nl.float32, buffer=nl.sbuf,
                            name="attn_lse")
        for j0 in nl.affine_range(-(-g_tiles // Q_GROUP)):
            tiles = []
            for j in range(j0 * Q_GROUP, min(g_tiles, (j0 + 1) * Q_GROUP)):
                q0 = (t0 + j) * Q_TILE
                mq = min(Q_TILE, sq - q0)
                kv_end = min(skv, q0 + mq) if masking.causal else skv
                tiles.append(_TileState(q0, mq, kv_end, j))
            n_blocks = -(-max(t.kv_end for t in tiles) // K_BLOCK)
            fronts = []
            for kb in nl.sequential_range(n_blocks):  # the softmax state carries over
                while len(fronts) <= PIPE_AHEAD and kb + len(fronts) < n_blocks:
                    k0 = (kb + len(fronts)) * K_BLOCK
                    fronts.append(_block_front(tiles, q_t, r0, k_t, k0, masking,
                                               q_m.t.dtype))
                _block_back(fronts.pop(0), v_sb, kb * K_BLOCK, d)
            for t in tiles:
                _finish_tile(t, out_sb, lse_sb, masking.kind is not None)
        store_rows(out_m, out_sb, r0, rows, 0, d)
        store_rows(lse_m, lse_sb, r0, rows, 0, 1)


def _per_store(n_q: int, d: int, isz: int) -> int:
    """Query tiles per output store (and per Q^T load): >= OUT_GROUP_BYTES per partition."""
    return max(1, min(n_q, OUT_GROUP_BYTES // (d * isz)))


def _block_front(tiles, q_t, q_base: int, k_t, k0: int, masking: Masking, pdtype) -> list:
    """Scores, masks, running max, P and row sums of one key block for a group of query tiles,
    stage by stage across the group (so in-order engine queues interleave the tiles)."""
    live = [t for t in tiles if k0 < t.kv_end]
    widths = [min(K_BLOCK, t.kv_end - k0) for t in live]
    d = q_t.shape[0]
    raw = []
    for t, kw in zip(live, widths, strict=True):
        s_ps = nl.ndarray((Q_TILE, kw), dtype=nl.float32, buffer=nl.psum, name="scores")
        q0 = t.q0 - q_base
        nisa.nc_matmul(dst=s_ps[0:t.mq, :], stationary=q_t[0:d, 0, q0 : q0 + t.mq],
                       moving=k_t[0:d, 0, k0 : k0 + kw])
        raw.append(s_ps)
    masked = [masking.scores(s, t.q0, t.mq, k0, kw, True)
              for s, t, kw in zip(raw, live, widths, strict=True)]
    xs = masking.xs
    neg_max = []
    for t, (_, m_blk) in zip(live, masked, strict=True):
        nm = nl.ndarray((Q_TILE, 1), dtype=nl.float32, buffer=nl.sbuf, name="neg_max")
        # -xs * max(m_old, m_blk) = min(-xs * m_old, -xs * m_blk); the first block clamps a
        # row of only masked keys (max -inf) to a finite FP32_MAX.
        cap = FP32_MAX if t.neg_max is None else t.neg_max[0:t.mq, :]
        nisa.tensor_scalar(dst=nm[0:t.mq, :], data=m_blk[0:t.mq, :], op0=nl.multiply,
                           operand0=-xs, op1=nl.minimum, operand1=cap)
        neg_max.append(nm)
    probs, sums = [], []
    for t, (x, _), nm, kw in zip(live, masked, neg_max, widths, strict=True):
        p_sb = nl.ndarray((Q_TILE, kw), dtype=pdtype, buffer=nl.sbuf, name="p")
        rowsum = nl.ndarray((Q_TILE, 1), dtype=nl.float32, buffer=nl.sbuf, name="rowsum")
        nisa.activation(dst=p_sb[0:t.mq, :], op=nl.exp, data=x, bias=nm[0:t.mq, :], scale=xs,
                        reduce_op=nl.add, reduce_res=rowsum[0:t.mq, :],
                        reduce_cmd=nisa.reduce_cmd.reset_reduce)
        probs.append(p_sb)
        sums.append(rowsum)
    pending = []
    for t, nm, p_sb, rowsum, kw in zip(live, neg_max, probs, sums, widths, strict=True):
        mq, alpha = t.mq, None
        if t.neg_max is None:
            t.l = rowsum
        else:  # alpha = exp(m_old - m_new); l = l * alpha + rowsum, both on ScalarE
            alpha = nl.ndarray((Q_TILE, 1), dtype=nl.float32, buffer=nl.sbuf, name="alpha")
            nisa.activation(dst=alpha[0:mq, :], op=nl.exp, data=t.neg_max[0:mq, :],
                            bias=nm[0:mq, :], scale=-1.0)
            l_new = nl.ndarray((Q_TILE, 1), dtype=nl.float32, buffer=nl.sbuf, name="l_run")
            nisa.activation(dst=l_new[0:mq, :], op=nl.copy, data=t.l[0:mq, :],
                            scale=alpha[0:mq, :], bias=rowsum[0:mq, :])
            t.l = l_new
        t.neg_max = nm
        pending.append((t, p_sb, alpha, kw))
    return pending


def _block_back(pending: list, v_sb, k0: int, d: int) -> None:
    """P^T by TensorE transposes, P @ V, then o = o * alpha + P @ V (VectorE)."""
    p_t = [transpose_probs(p_sb, t.mq, kw) for t, p_sb, _, kw in pending]
    pv_ps = nl.ndarray((Q_TILE, len(pending), d), dtype=nl.float32, buffer=nl.psum, name="pv")
    for i, (pt, (t, _, _, kw)) in enumerate(zip(p_t, pending, strict=True)):
        n_t = -(-kw // K_TILE)
        for kt in range(n_t):
            rt = min(K_TILE, kw - kt * K_TILE)
            nisa.nc_matmul(dst=pv_ps[0:t.mq, i, :], stationary=pt[0:rt, kt, 0:t.mq],
                           moving=v_sb[0:rt, k0 // K_TILE + kt, :], accumulate=kt > 0)
    for i, (t, _, alpha, _) in enumerate(pending):
        o_new = nl.ndarray((Q_TILE, d), dtype=nl.float32, buffer=nl.sbuf, name="o_acc")
        if alpha is None:
            nisa.tensor_copy(dst=o_new[0:t.mq, :], src=pv_ps[0:t.mq, i, :])
        else:
            nisa.scalar_tensor_tensor(dst=o_new[0:t.mq, :], data=t.o[0:t.mq, :],
                                      op0=nl.multiply, operand0=alpha[0:t.mq, :], op1=nl.add,
                                      operand1=pv_ps[0:t.mq, i, :])
        t.o = o_new


def _finish_tile(t: _TileState, out_sb, lse_sb, maybe_empty: bool) -> None:
    """out = o / l and lse = max + ln(l); a row of only masked keys (l = 0) gets 0 and 0."""
    mq = t.mq
    l_c, flag = t.l, None
    if maybe_empty:
        l_c = nl.ndarray((Q_TILE, 1), dtype=nl.float32, buffer=nl.sbuf, name="l_clamped")
        nisa.tensor_scalar(dst=l_c[0:mq, :], data=t.l[0:mq, :], op0=nl.maximum, operand0=1.0)
        flag = nl.ndarray((Q_TILE, 1), dtype=nl.float32, buffer=nl.sbuf, name="row_live")
        nisa.tensor_scalar(dst=flag[0:mq, :], data=t.l[0:mq, :], op0=nl.greater, operand0=0.0)
    inv_l = nl.ndarray((Q_TILE, 1), dtype=nl.float32, buffer=nl.sbuf, name="inv_l")
    nisa.reciprocal(dst=inv_l[0:mq, :], data=l_c[0:mq, :])
    nisa.tensor_scalar(dst=out_sb[0:mq, t.slot, :], data=t.o[0:mq, :], op0=nl.multiply,
                       operand0=inv_l[0:mq, :])
    ln_l = nl.ndarray((Q_TILE, 1), dtype=nl.float32, buffer=nl.sbuf, name="ln_l")
    nisa.activation(dst=ln_l[0:mq, :], op=nl.log, data=l_c[0:mq, :])
    extra = {} if flag is None else {"op1": nl.multiply, "operand1": flag[0:mq, :]}
    nisa.tensor_scalar(dst=lse_sb[0:mq, t.slot, :], data=ln_l[0:mq, :], op0=nl.subtract,
                       operand0=t.neg_max[0:mq, :], **extra)


# ---------------------------------------------------------------- references


def _ref_logits(q, k, scale, causal, attn_mask):
    """scale * q k^T + mask in float64, [B, H, Sq, Skv] (k repeated over the GQA groups)."""
    q64, k64 = np.asarray(q, np.float64), np.asarray(k, np.float64)
    group = q64.shape[1] // k64.shape[1]
    k64 = np.repeat(k64, group, axis=1)
    logits = scale * q64 @ np.swapaxes(k64, -1, -2)
    sq, skv = logits.shape[-2:]
    if causal:
        logits = np.where(np.tril(np.ones((sq, skv), bool)), logits, -np.inf)
    if attn_mask is not None:
        m = np.asarray(attn_mask)
        logits = np.where(m, logits, -np.inf) if m.dtype == bool else logits + m.astype(np.float64)
    return logits


def flash_attention_ref(q, k, v, scale, causal=False, attn_mask=None):
    """(out, lse) in float64; rows with every key masked give out 0 and lse 0 (torch CPU)."""
    logits = _ref_logits(q, k, scale, causal, attn_mask)
    v64 = np.repeat(np.asarray(v, np.float64), q.shape[1] // v.shape[1], axis=1)
    mx = logits.max(axis=-1, keepdims=True)
    empty = ~np.isfinite(mx) & (mx < 0)
    mx = np.where(empty, 0.0, mx)
    p = np.exp(logits - mx)
    total = np.where(empty, 1.0, p.sum(axis=-1, keepdims=True))
    out = np.where(empty, 0.0, p / total) @ v64
    lse = np.where(empty, 0.0, mx + np.log(total))[..., 0]
    return out, lse


def flash_attention_backward_ref(q, k, v, grad_out, scale, causal=False, attn_mask=None):
    """(dq, dk, dv) in float64 from the exact softmax gradient (rows with every key masked
    contribute nothing); dk, dv summed over the query heads sharing a kv head."""
    logits = _ref_logits(q, k, scale, causal, attn_mask)
    group = q.shape[1] // k.shape[1]
    q64, do = np.asarray(q, np.float64), np.asarray(grad_out, np.float64)
    k64 = np.repeat(np.asarray(k, np.float64), group, axis=1)
    v64 = np.repeat(np.asarray(v, np.float64), group, axis=1)
    mx = logits.max(axis=-1, keepdims=True)
    empty = ~np.isfinite(mx) & (mx < 0)
    p = np.exp(logits - np.where(empty, 0.0, mx))
    p = np.where(empty, 0.0, p / np.where(empty, 1.0, p.sum(axis=-1, keepdims=True)))
    dv = np.swapaxes(p, -1, -2) @ do
    dp = do @ np.swapaxes(v64, -1, -2)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    dq = scale * ds @ k64
    dk = scale * np.swapaxes(ds, -1, -2) @ q64

    def fold(x):
        b, h, s, d = x.shape
        return x.reshape(b, h // group, group, s, d).sum(axis=2)

    return dq, fold(dk), fold(dv)
