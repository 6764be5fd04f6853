"""Flash attention helpers shared by the forward and backward kernels: per-head strided views,
resident loads, and the masking of one score block (causal cut, bool or additive mask).

Layer: kernel library; public NKI API only.

Masked scores are -inf (as torch's math path): exp(-inf - m) is exactly 0 with any finite m.
The running max is kept finite (clamped to -FP32_MAX while a row has seen only masked keys),
so a fully masked row ends with o = 0 and l = 0, and its output is 0 as torch gives.
Scores are kept in one of two domains: raw (s = q.k, the scale folded into the exponential,
when there is no additive mask and scale > 0) or scaled (t = scale * s + mask).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

from ._common import fail, scalar_copy
from ._kmajor import P_MAX, Mat, kmajor_mode, load_kmajor

Q_TILE = 128  # queries per tile: score rows on partitions (gemm_stationary_fmax)
K_BLOCK = 512  # keys per score block: 512 fp32 scores fill one PSUM bank
K_TILE = 128  # keys per P @ V contraction tile (pmax)
NEG_INF = float("-inf")
FP32_MAX = 3.4028234663852886e38  # -FP32_MAX: the clamp of a running max of only masked keys


def broadcast_strides(name: str, t: Any, shape: tuple[int, ...], what: str) -> list[int]:
    """Element strides of HBM tensor t broadcast (numpy rules) to `shape`: 0 where t has a
    size-1 or missing dim; fail() naming the operand otherwise."""
    tshape = [int(s) for s in t.shape]
    if len(tshape) > len(shape):
        fail(f"{what}: {name} has shape {tshape}, more dims than {list(shape)}")
    pad = len(shape) - len(tshape)
    out = [0] * pad
    for d, (size, st) in enumerate(zip(tshape, t.strides, strict=True)):
        if size not in (1, shape[pad + d]):
            fail(
                f"{what}: {name} of shape {tshape} does not broadcast to {list(shape)} "
                f"(dim {d}: {size} vs {shape[pad + d]})"
            )
        out.append(0 if size == 1 else int(st))
    return out


def head_mat(t: Any, b: int, h: int, rows: int, cols: int) -> Mat:
    """The [rows, cols] matrix of head (b, h) of a [B, H, rows, cols] HBM tensor."""
    st = [int(s) for s in t.strides]
    return Mat(t, rows, cols, st[2], st[3], int(t.offset) + b * st[0] + h * st[1])


@dataclass(frozen=True)
class MaskSpec:
    """The attention mask of a launch: kind 'bool' or 'float', the tensor and its strides
    broadcast to [B, H, Sq, Skv]."""

    kind: str
    t: Any
    strides: tuple[int, ...]

    def head(self, b: int, h: int, sq: int, skv: int) -> Mat:
        st = self.strides
        return Mat(self.t, sq, skv, st[2], st[3], int(self.t.offset) + b * st[0] + h * st[1])


def load_transposed(m: Mat, name: str):
    """A [rows, D] head matrix as an SBUF tile [D, 1, rows] (D on partitions), loaded in
    chunks of 2048 rows (each chunk one DMA, or TensorE transposes on NeuronCore-v2)."""
    d, rows = m.cols, m.rows
    t = nl.ndarray((d, 1, rows), dtype=m.t.dtype, buffer=nl.sbuf, name=name)
    mt = m.T
    mode = kmajor_mode(mt)
    for r0 in range(0, rows, 2048):
        load_kmajor(t[:, :, r0:], mt, 0, d, r0, min(2048, rows - r0), mode)
    return t


def load_rows(m: Mat, name: str):
    """A [rows, D] head matrix as an SBUF tile [128, ceil(rows/128), D] (row tile t on
    column t), one DMA per 2048 rows."""
    n_t = -(-m.rows // P_MAX)
    t = nl.ndarray((P_MAX, n_t, m.cols), dtype=m.t.dtype, buffer=nl.sbuf, name=name)
    for r0 in range(0, m.rows, 2048):
        nr = min(2048, m.rows - r0)
        load_kmajor(t[:, r0 // P_MAX :, :], m, r0, nr, 0, m.cols, "direct")
    return t


class Masking:
    """Masks the score blocks of one head: causal (top-left aligned: key j visible to query
    i iff j <= i) and/or attn_mask (bool: True keeps; float: added to scale * s)."""

    def __init__(self, scale: float, causal: bool, mask: Mat | None, kind: str | None):
        self.scale, self.causal, self.mask, self.kind = scale, causal, mask, kind
        # Domain scale xs: p = exp(xs * x - m). Raw scores unless an additive mask (or a
        # non-positive scale, which breaks max(scale * s) = scale * max(s)) needs them scaled.
        self.xs = scale if kind != "float" and scale > 0 else 1.0

    def _mask_tile(self, q0: int, mq: int, k0: int, kw: int):
        dtype = nl.uint8 if self.kind == "bool" else self.mask.t.dtype
        t = nl.ndarray((Q_TILE, kw), dtype=dtype, buffer=nl.sbuf, name="attn_mask")
        nisa.dma_copy(dst=t[0:mq, :], src=self.mask.block(q0, mq, k0, kw))
        return t

    def scores(self, s_ps, q0: int, mq: int, k0: int, kw: int, want_max: bool):
        """(x, m_blk): the masked scores of s_ps[:mq, :kw] (PSUM, raw q.k) in this head's
        domain (x may be s_ps itself), and their row max [128, 1] fp32 if want_max."""
        cut = self.causal and k0 + kw - 1 > q0  # some key is later than the tile's 1st query
        s = s_ps[0:mq, 0:kw]
        m_blk = None
        if want_max:
            m_blk = nl.ndarray((Q_TILE, 1), dtype=nl.float32, buffer=nl.sbuf, name="m_blk")
        fused = want_max and not cut  # the masking instruction also takes the row max
        red = {"reduce_res": m_blk[0:mq, :]} if fused else {}
        reduced = False
        x = s
        if self.kind is not None or cut or self.xs != self.scale:
            x_sb = nl.ndarray((Q_TILE, kw), dtype=nl.float32, buffer=nl.sbuf, name="scores_m")
            x = x_sb[0:mq, :]
            if self.kind == "float":
                mask = self._mask_tile(q0, mq, k0, kw)
                if fused:
                    red.update(reduce_op=nl.maximum)
                nisa.scalar_tensor_tensor(dst=x, data=s, op0=nl.multiply, operand0=self.scale,
                                          op1=nl.add, operand1=mask[0:mq, :], **red)
                reduced = fused
            elif self.kind == "bool":
                src = s
                if self.xs != self.scale:  # scale <= 0: the scores are kept scaled
                    nisa.tensor_scalar(dst=x, data=s, op0=nl.multiply, operand0=self.scale)
                    src = x
                mask = self._mask_tile(q0, mq, k0, kw)
                nisa.select_reduce(dst=x, predicate=mask[0:mq, :], on_true=src,
                                   on_false=NEG_INF, reduce_cmd=nisa.reduce_cmd.reset_reduce,
                                   **red)
                reduced = fused
            elif self.xs != self.scale:
                nisa.tensor_scalar(dst=x, data=s, op0=nl.multiply, operand0=self.scale)
            else:
                nisa.tensor_copy(dst=x, src=s)  # GpSimd cannot read PSUM
            if cut:
                # Keep key k0 + j for query q0 + p iff (q0 - k0) + p - j >= 0.
                nisa.affine_select(dst=x, pattern=[[-1, kw]], offset=q0 - k0,
                                   channel_multiplier=1, on_true_tile=x,
                                   on_false_value=NEG_INF, cmp_op=nl.greater_equal)
        if want_max and not reduced:
            nisa.tensor_reduce(dst=m_blk[0:mq, :], op=nl.maximum, data=x, axis=1)
        return x, m_blk


def transpose_probs(p_sb, mq: int, kw: int):
    """P^T of a [mq, kw] probability block as [128 keys, kw/128, 128 queries] in SBUF
    (TensorE transposes per 128 keys into one PSUM bank, one ScalarE copy)."""
    n_t = -(-kw // K_TILE)
    pt_ps = nl.ndarray((K_TILE, n_t, Q_TILE), dtype=p_sb.dtype, buffer=nl.psum, name="pT_ps")
    for t in range(n_t):
        rt = min(K_TILE, kw - t * K_TILE)
        nisa.nc_transpose(dst=pt_ps[0:rt, t, 0:mq], data=p_sb[0:mq, t * K_TILE : t * K_TILE + rt],
                          engine=nisa.engine.tensor)
    pt = nl.ndarray((K_TILE, n_t, Q_TILE), dtype=p_sb.dtype, buffer=nl.sbuf, name="pT")
    if kw % K_TILE == 0:
        scalar_copy(pt[:, :, 0:mq], pt_ps[:, :, 0:mq])
    else:  # the last key tile has fewer rows: copy only what the transposes wrote
        if n_t > 1:
            scalar_copy(pt[:, 0 : n_t - 1, 0:mq], pt_ps[:, 0 : n_t - 1, 0:mq])
        rt = kw - (n_t - 1) * K_TILE
        scalar_copy(pt[0:rt, n_t - 1, 0:mq], pt_ps[0:rt, n_t - 1, 0:mq])
    return pt
