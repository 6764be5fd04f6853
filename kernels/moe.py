"""Mixture-of-experts feed-forward layer (top-2 routing, SwiGLU experts), with its reference.

Layer: kernel library (trnsim.kernels); written against the public NKI API only.
"""

from __future__ import annotations

import numpy as np

from trnsim.nki import isa as nisa
from trnsim.nki import jit
from trnsim.nki import language as nl

from ._common import fail

P_MAX = 128  # partitions per tile; contraction rows per nc_matmul (pmax)
TOK_TILE = 128  # tokens per router / down-projection matmul: stationary free size
TOK_BLOCK = 512  # tokens per gate/up matmul: moving free size, 512 fp32 fill one PSUM bank
H_CHUNK = 512  # output columns per down-projection matmul (one PSUM bank of fp32)
TOP_K = 2  # experts per token
MAX8 = 8  # max8 / nc_find_index8 always produce 8 values per partition
MAX_EXPERTS = 512  # router logits are one moving tile (gemm_moving_fmax on trn2)
FP32_MIN = -3.4028235e38  # pads logits up to 8 columns; never selected over a real expert
SBUF_SHARE = 0.8  # share of usable SBUF for resident tokens, accumulators and expert weights
DTYPES = ("bfloat16", "float16", "float32")


def _check_operands(x, w_router, w_gate, w_up, w_down) -> tuple[int, int, int, int]:
    """(T, H, E, F) of a valid call; raises ConstraintError naming the bad operand otherwise."""
    if len(x.shape) != 2 or len(w_router.shape) != 2 or len(w_gate.shape) != 3:
        fail(
            f"moe_ffn: expected x [T, H], w_router [H, E], w_gate/w_up [E, H, F], w_down "
            f"[E, F, H]; got x {list(x.shape)}, w_router {list(w_router.shape)}, w_gate "
            f"{list(w_gate.shape)}"
        )
    t, h = x.shape
    e, f = w_router.shape[1], w_gate.shape[2]
    want = {"w_router": (h, e), "w_gate": (e, h, f), "w_up": (e, h, f), "w_down": (e, f, h)}
    for name, arr in (
        ("w_router", w_router),
        ("w_gate", w_gate),
        ("w_up", w_up),
        ("w_down", w_down),
    ):
        if tuple(arr.shape) != want[name]:
            fail(
                f"moe_ffn: {name} has shape {list(arr.shape)}; with x [T={t}, H={h}], "
                f"E={e} experts and F={f} it must be {list(want[name])}"
            )
        if arr.dtype != x.dtype:
            fail(
                f"moe_ffn: {name} has dtype {arr.dtype} but x has {x.dtype}; all operands "
                "must share one dtype"
            )
    if x.dtype not in DTYPES:
        fail(f"moe_ffn: dtype {x.dtype} is not one of {', '.join(DTYPES)}")
    for name, size in (("T", t), ("H", h), ("F", f)):
        if size <= 0 or size % P_MAX:
            fail(f"moe_ffn: {name}={size} is not a positive multiple of {P_MAX}")
    if not TOP_K <= e <= MAX_EXPERTS:
        fail(f"moe_ffn: E={e} experts; top-{TOP_K} routing needs {TOP_K} <= E <= {MAX_EXPERTS}")
    isz = x.dtype.itemsize
    # Per partition: x^T (H/128 * T), the fp32 accumulator (T/128 * H) and combine weights
    # (T/128 * E), two experts' gate, up and down weights (3 * H/128 * F each).
    per_part = (h // P_MAX) * t * isz + t // P_MAX * (h + e) * 4 + 2 * 3 * (h // P_MAX) * f * isz
    budget = nl.tile_size.total_available_sbuf_size * SBUF_SHARE
    if per_part > budget:
        fail(
            f"moe_ffn: T={t}, H={h}, F={f} need {per_part} bytes per partition resident; "
            f"at most {int(budget)} fit (split the tokens)"
        )
    return t, h, e, f


def _load_tokens_transposed(x, t: int, h: int):
    """x^T resident in SBUF as [128, H/128, T] (hidden on partitions), by TensorE transposes."""
    dtype = x.dtype
    h_tiles = h // P_MAX
    per_bank = max(1, 2048 // (P_MAX * dtype.itemsize))  # transposed tiles per PSUM bank
    x_t = nl.ndarray((P_MAX, h_tiles, t), dtype=dtype, buffer=nl.sbuf, name="xT")
    for tt in nl.affine_range(t // TOK_TILE):
        x_sb = nl.ndarray((TOK_TILE, h), dtype=dtype, buffer=nl.sbuf, name="x_tile")
        nisa.dma_copy(dst=x_sb, src=x[tt * TOK_TILE : (tt + 1) * TOK_TILE, :])
        for g in nl.affine_range(-(-h_tiles // per_bank)):
            n = min(per_bank, h_tiles - g * per_bank)
            tp = nl.ndarray((P_MAX, n, TOK_TILE), dtype=dtype, buffer=nl.psum, name="xT_ps")
            for i in nl.affine_range(n):
                c0 = (g * per_bank + i) * P_MAX
                nisa.nc_transpose(
                    dst=tp[:, i, :], data=x_sb[:, c0 : c0 + P_MAX], engine=nisa.engine.tensor
                )
            nisa.tensor_copy(
                dst=x_t[:, g * per_bank : g * per_bank + n, tt * TOK_TILE : (tt + 1) * TOK_TILE],
                src=tp,
            )
    return x_t


def _route(x_t, wr_sb, tt: int, e: int, h_tiles: int, eid, comb_dst) -> None:
    """Top-2 routing of one token tile: comb_dst[tok, e] = gate weight of expert e, or 0."""
    logits_ps = nl.ndarray((TOK_TILE, e), dtype=nl.float32, buffer=nl.psum, name="logits_ps")
    for ht in nl.affine_range(h_tiles):
        nisa.nc_matmul(
            dst=logits_ps,
            stationary=x_t[:, ht, tt * TOK_TILE : (tt + 1) * TOK_TILE],
            moving=wr_sb[:, ht, :],
            accumulate=ht > 0,
        )
    width = max(e, MAX8)
    logits = nl.ndarray((TOK_TILE, width), dtype=nl.float32, buffer=nl.sbuf, name="logits")
    if e < MAX8:
        nisa.memset(dst=logits, value=FP32_MIN)
    nisa.tensor_copy(dst=logits[:, 0:e], src=logits_ps)
    top = nl.ndarray((TOK_TILE, MAX8), dtype=nl.float32, buffer=nl.sbuf, name="top8")
    nisa.max8(dst=top, src=logits)
    idx = nl.ndarray((TOK_TILE, MAX8), dtype=nl.uint32, buffer=nl.sbuf, name="top8_idx")
    nisa.nc_find_index8(dst=idx, data=logits, vals=top)
    idx_f = nl.ndarray((TOK_TILE, TOP_K), dtype=nl.float32, buffer=nl.sbuf, name="topk_idx")
    nisa.tensor_copy(dst=idx_f, src=idx[:, 0:TOP_K])

    # Gate weights: softmax over the top-2 logits (the largest is top[:, 0]).
    neg_max = nl.ndarray((TOK_TILE, 1), dtype=nl.float32, buffer=nl.sbuf, name="neg_max")
    nisa.tensor_scalar(dst=neg_max, data=top[:, 0:1], op0=nl.multiply, operand0=-1.0)
    ex = nl.ndarray((TOK_TILE, TOP_K), dtype=nl.float32, buffer=nl.sbuf, name="gate_exp")
    ex_sum = nl.ndarray((TOK_TILE, 1), dtype=nl.float32, buffer=nl.sbuf, name="gate_sum")
    nisa.activation(
        dst=ex,
        op=nl.exp,
        data=top[:, 0:TOP_K],
        bias=neg_max,
        reduce_op=nl.add,
        reduce_res=ex_sum,
        reduce_cmd=nisa.reduce_cmd.reset_reduce,
    )
    inv = nl.ndarray((TOK_TILE, 1), dtype=nl.float32, buffer=nl.sbuf, name="gate_inv")
    nisa.reciprocal(dst=inv, data=ex_sum)
    gates = nl.ndarray((TOK_TILE, TOP_K), dtype=nl.float32, buffer=nl.sbuf, name="gates")
    nisa.tensor_scalar(dst=gates, data=ex, op0=nl.multiply, operand0=inv)

    # Dense combine weights: (expert id == chosen index) * gate, summed over the k choices.
    parts = []
    for i in nl.static_range(TOP_K):
        part = nl.ndarray((TOK_TILE, e), dtype=nl.float32, buffer=nl.sbuf, name="comb_part")
        nisa.tensor_scalar(
            dst=part,
            data=eid,
            op0=nl.equal,
            operand0=idx_f[:, i : i + 1],
            op1=nl.multiply,
            operand1=gates[:, i : i + 1],
        )
        parts.append(part)
    nisa.tensor_tensor(dst=comb_dst, data1=parts[0], data2=parts[1], op=nl.add)


def _load_expert(w, ex: int, rows: int, cols: int, name: str):
    """Expert ex's [rows, cols] weight as [128, rows/128, cols]: row tile r on column r."""
    t = nl.ndarray((P_MAX, rows // P_MAX, cols), dtype=w.dtype, buffer=nl.sbuf, name=name)
    nisa.dma_copy(dst=t, src=w[ex].reshape((rows // P_MAX, P_MAX, cols)).permute((1, 0, 2)))
    return t


def _expert_hidden(x_t, wg, wu, t0: int, tw: int, h_tiles: int, f_tiles: int, dtype):
    """hT = (silu(x Wg) * (x Wu))^T for tokens t0..t0+tw: [128, F/128, tw], F on partitions."""
    h_t = nl.ndarray((P_MAX, f_tiles, tw), dtype=dtype, buffer=nl.sbuf, name="hT")
    for ft in nl.affine_range(f_tiles):
        g_ps = nl.ndarray((P_MAX, tw), dtype=nl.float32, buffer=nl.psum, name="gate_ps")
        u_ps = nl.ndarray((P_MAX, tw), dtype=nl.float32, buffer=nl.psum, name="up_ps")
        for ht in nl.affine_range(h_tiles):
            xs = x_t[:, ht, t0 : t0 + tw]
            nisa.nc_matmul(
                dst=g_ps,
                stationary=wg[:, ht, ft * P_MAX : (ft + 1) * P_MAX],
                moving=xs,
                accumulate=ht > 0,
            )
            nisa.nc_matmul(
                dst=u_ps,
                stationary=wu[:, ht, ft * P_MAX : (ft + 1) * P_MAX],
                moving=xs,
                accumulate=ht > 0,
            )
        act = nl.ndarray((P_MAX, tw), dtype=nl.float32, buffer=nl.sbuf, name="silu_gate")
        nisa.activation(dst=act, op=nl.silu, data=g_ps)
        nisa.tensor_tensor(dst=h_t[:, ft, :], data1=act, data2=u_ps, op=nl.multiply)
    return h_t


@jit
def moe_ffn(x, w_router, w_gate, w_up, w_down):
    """Mixture-of-experts FFN: top-2 routing over E SwiGLU experts, gate-weighted combine.

    Tokens are transposed once on the Tensor Engine (x^T stays resident). Routing, per tile
    of 128 tokens: router logits by matmul (fp32 PSUM); ``max8`` gives the 8 largest logits
    and ``nc_find_index8`` their expert indices; the gate weights are the softmax of the top
    two logits (ScalarE exp with the sum in its accumulator); a dense combine matrix
    ``C[tok, e]`` (gate weight if e was chosen, else 0) is built by comparing an iota of
    expert ids with the chosen indices. Experts, one after another (weights double
    buffered): ``hT = silu(Wg^T x^T) * (Wu^T x^T)`` with F on partitions (gate and up
    matmuls accumulate over H in PSUM), then ``y = h Wd`` per 128 tokens, and VectorE adds
    ``C[:, e] * y`` into an fp32 accumulator in one fused instruction reading PSUM.

    Dimensions:
        T: tokens, multiple of 128.  H: hidden size, multiple of 128.
        E: experts, 2..512.          F: expert intermediate size, multiple of 128.

    Args:
        x: [T, H] HBM tensor, bfloat16, float16 or float32.
        w_router: [H, E] router weight.
        w_gate: [E, H, F] gate projections (SiLU branch).
        w_up: [E, H, F] up projections.
        w_down: [E, F, H] down projections.

    Returns:
        [T, H] shared-HBM tensor of x's dtype:
        ``sum over the 2 chosen experts e of gate_e * (silu(x Wg_e) * (x Wu_e)) Wd_e``.

    Notes:
        Dense compute with masking: every expert processes every token and the combine
        weight (0 for experts not chosen) masks the result. That costs E/2 times the FLOPs of
        a sparse dispatch but keeps the kernel static (no data-dependent control flow or
        gathers); it suits few experts or few tokens.
        Ties between logits go to the lower expert index (nc_find_index8 reports successive
        occurrences), so exactly two experts are chosen. The intermediate h is rounded to
        the input dtype before the down projection; all sums are fp32.
    """
    t, h, e, f = _check_operands(x, w_router, w_gate, w_up, w_down)
    dtype = x.dtype
    h_tiles, f_tiles, t_tiles = h // P_MAX, f // P_MAX, t // TOK_TILE
    out = nl.ndarray((t, h), dtype=dtype, buffer=nl.shared_hbm, name="moe_out")

    x_t = _load_tokens_transposed(x, t, h)
    wr_sb = nl.ndarray((P_MAX, h_tiles, e), dtype=dtype, buffer=nl.sbuf, name="w_router")
    nisa.dma_copy(dst=wr_sb, src=w_router.reshape((h_tiles, P_MAX, e)).permute((1, 0, 2)))
    eid = nl.ndarray((TOK_TILE, e), dtype=nl.float32, buffer=nl.sbuf, name="expert_ids")
    nisa.iota(dst=eid, pattern=[[1, e]], offset=0, channel_multiplier=0)
    comb = nl.ndarray((TOK_TILE, t_tiles, e), dtype=nl.float32, buffer=nl.sbuf, name="combine")
    for tt in nl.affine_range(t_tiles):
        _route(x_t, wr_sb, tt, e, h_tiles, eid, comb[:, tt, :])

    acc = nl.ndarray((TOK_TILE, t_tiles, h), dtype=nl.float32, buffer=nl.sbuf, name="moe_acc")
    for ex in nl.sequential_range(e):  # the accumulator carries from expert to expert
        wg = _load_expert(w_gate, ex, h, f, "w_gate_e")
        wu = _load_expert(w_up, ex, h, f, "w_up_e")
        wd = _load_expert(w_down, ex, f, h, "w_down_e")
        for tb in nl.affine_range(-(-t // TOK_BLOCK)):
            t0 = tb * TOK_BLOCK
            tw = min(TOK_BLOCK, t - t0)
            h_t = _expert_hidden(x_t, wg, wu, t0, tw, h_tiles, f_tiles, dtype)
            for s in nl.affine_range(tw // TOK_TILE):
                tt = (t0 + s * TOK_TILE) // TOK_TILE
                for hc in nl.affine_range(-(-h // H_CHUNK)):
                    c0 = hc * H_CHUNK
                    cw = min(H_CHUNK, h - c0)
                    y_ps = nl.ndarray(
                        (TOK_TILE, cw), dtype=nl.float32, buffer=nl.psum, name="down_ps"
                    )
                    for ft in nl.affine_range(f_tiles):
                        nisa.nc_matmul(
                            dst=y_ps,
                            stationary=h_t[:, ft, s * TOK_TILE : (s + 1) * TOK_TILE],
                            moving=wd[:, ft, c0 : c0 + cw],
                            accumulate=ft > 0,
                        )
                    dst = acc[:, tt, c0 : c0 + cw]
                    if ex == 0:
                        nisa.tensor_scalar(
                            dst=dst, data=y_ps, op0=nl.multiply, operand0=comb[:, tt, ex : ex + 1]
                        )
                    else:
                        nisa.scalar_tensor_tensor(
                            dst=dst,
                            data=y_ps,
                            op0=nl.multiply,
                            operand0=comb[:, tt, ex : ex + 1],
                            op1=nl.add,
                            operand1=dst,
                        )

    for tt in nl.affine_range(t_tiles):
        y = nl.ndarray((TOK_TILE, h), dtype=dtype, buffer=nl.sbuf, name="moe_y")
        nisa.tensor_copy(dst=y, src=acc[:, tt, :])
        nisa.dma_copy(dst=out[tt * TOK_TILE : (tt + 1) * TOK_TILE, :], src=y)
    return out


def moe_ffn_ref(
    x: np.ndarray, w_router: np.ndarray, w_gate: np.ndarray, w_up: np.ndarray, w_down: np.ndarray
) -> np.ndarray:
    """The MoE FFN in float64: top-2 experts per token (ties to the lower index)."""
    x64, wr, wg, wu, wd = (
        np.asarray(a, dtype=np.float64) for a in (x, w_router, w_gate, w_up, w_down)
    )
    logits = x64 @ wr
    top = np.argsort(-logits, axis=1, kind="stable")[:, :TOP_K]
    chosen = np.take_along_axis(logits, top, axis=1)
    gates = np.exp(chosen - chosen[:, :1])
    gates /= gates.sum(axis=1, keepdims=True)
    out = np.zeros_like(x64)
    for e in range(wr.shape[1]):
        weight = (gates * (top == e)).sum(axis=1, keepdims=True)
        if not weight.any():
            continue
        g = x64 @ wg[e]
        hidden = g / (1.0 + np.exp(-g)) * (x64 @ wu[e])
        out += weight * (hidden @ wd[e])
    return out
