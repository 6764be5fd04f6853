"""gemm for batches of small products (M <= 128, K <= 128, N <= 512): several batch entries
per load, PSUM evacuation and store. Layer: kernel library; public NKI API only.

A group of g entries shares one K-major SBUF tile per operand ([K, g, M] and [K, g, N], one DMA
each when the entries' offsets step evenly), one PSUM tile whose banks hold 512 // N results
each, one or two evacuations and one store: per entry only its matmul is issued.
"""

from __future__ import annotations

import itertools

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

from ._kmajor import P_MAX, Mat, load_kmajor

BANK_FP32 = 512  # fp32 words per PSUM bank and partition
GROUP_BANKS = 1  # PSUM banks per group: one pipelines best on the model (bmm 256 x 16^3:
#                 20.6 us with one bank, 27.5 us with four)


def batched_fits(problems, k: int, kind: str) -> bool:
    """Whether the small-batch path serves this call (no addend; tiny matrices, >= 2 entries)."""
    p = problems[0]
    return (len(problems) > 1 and kind == "scale" and 1 <= k <= P_MAX
            and p.out.rows <= P_MAX and p.out.cols <= BANK_FP32)


def _stride(mats: list[Mat]) -> int | None:
    """The constant offset step of consecutive matrices, or None."""
    if len(mats) == 1:
        return 0
    step = mats[1].off - mats[0].off
    ok = all(b.off - a.off == step for a, b in itertools.pairwise(mats))
    return step if ok else None


def _load(dst, mats: list[Mat], mode: str) -> None:
    """dst[k, i, j] = mats[i][k, j] for a [K <= 128, g, W] SBUF tile."""
    m0, g = mats[0], len(mats)
    step = _stride(mats)
    if step is not None and mode == "direct":
        src = m0.pattern([[m0.rs, m0.rows], [step, g], [m0.cs, m0.cols]], 0, 0)
        nisa.dma_copy(dst=dst[0 : m0.rows, 0:g, :], src=src)
    elif step is not None and mode == "dma_transpose":
        # dst [K, g, W] from src [W, g, K] with the (2, 1, 0) permutation, K contiguous.
        src = m0.pattern([[m0.cs, m0.cols], [step, g], [m0.rs, m0.rows]], 0, 0)
        nisa.dma_transpose(dst=dst[0 : m0.rows, 0:g, :], src=src)
    else:
        for i, m in enumerate(mats):
            load_kmajor(dst[:, i : i + 1, :], m, 0, m.rows, 0, m.cols, mode)


def gemm_batched(problems, epi, a_mode: str, b_mode: str) -> None:
    """The small-batch loop nest (see the module docstring)."""
    p0 = problems[0]
    m, n, k = p0.out.rows, p0.out.cols, p0.b.rows
    per_bank = BANK_FP32 // n
    g = per_bank * GROUP_BANKS
    for gi, s0 in enumerate(range(0, len(problems), g)):
        group = problems[s0 : s0 + g]
        gn = len(group)
        a_sb = nl.ndarray((P_MAX, gn, m), dtype=p0.a_t.t.dtype, buffer=nl.sbuf, name="bmm_a")
        b_sb = nl.ndarray((P_MAX, gn, n), dtype=p0.b.t.dtype, buffer=nl.sbuf, name="bmm_b")
        _load(a_sb, [p.a_t for p in group], a_mode)
        _load(b_sb, [p.b for p in group], b_mode)
        banks = -(-gn // per_bank)
        acc = nl.ndarray((P_MAX, banks, BANK_FP32), dtype=nl.float32, buffer=nl.psum,
                         name="bmm_acc")
        for i in range(gn):
            bank, slot = divmod(i, per_bank)
            nisa.nc_matmul(dst=acc[0:m, bank, slot * n : (slot + 1) * n],
                           stationary=a_sb[0:k, i, :], moving=b_sb[0:k, i, :])
        res = nl.ndarray((P_MAX, gn, n), dtype=p0.out.t.dtype, buffer=nl.sbuf, name="bmm_res")
        full, rest = divmod(gn, per_bank)
        engine = nisa.engine.vector if gi % 2 == 0 else nisa.engine.scalar
        if full:
            # Same elements per partition in the same order: [m, full * per_bank, n] of res,
            # [m, full, per_bank * n] of the PSUM banks.
            epi.apply(res[0:m, 0 : full * per_bank, :], acc[0:m, 0:full, 0 : per_bank * n],
                      engine, None)
        if rest:
            epi.apply(res[0:m, full * per_bank : gn, :], acc[0:m, full, 0 : rest * n], engine,
                      None)
        outs = [p.out for p in group]
        step = _stride(outs)
        o = outs[0]
        if step is not None:
            dst = o.pattern([[o.rs, m], [step, gn], [o.cs, n]], 0, 0)
            nisa.dma_copy(dst=dst, src=res[0:m, :, :])
        else:
            for i, om in enumerate(outs):
                nisa.dma_copy(dst=om.block(0, m, 0, n), src=res[0:m, i, :])
