"""General matrix multiply device kernel: out = beta * c + alpha * (a @ b) for any shapes,
strides, batch broadcast and the fp32/bf16/fp16 dtypes, and its float64 reference.

Serves ATen mm, bmm, addmm, baddbmm, addmv/mv, linear, matmul and their backward (which multiply
by transposed views). Layer: kernel library (trnsim.kernels); public NKI API only. Follows
docs/device-kernels.md: destination passing, HBM views as they are, fail() at the caller.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

from ._cores import gemm_share
from ._gemm_batched import batched_fits, gemm_batched
from ._gemm_epilogue import Epilogue, epilogue_kind
from ._gemm_plan import DTYPES as DTYPES  # the dtypes gemm takes (re-exported)
from ._gemm_plan import plan
from ._kmajor import Mat, kmajor_mode, kmajor_pieces

P_MAX = 128  # contraction rows per nc_matmul: partitions (pmax)
TILE_M = 128  # stationary free size per nc_matmul: result partitions (gemm_stationary_fmax)
TILE_N = 512  # moving free size per nc_matmul: 512 fp32 fill one 2 KiB PSUM bank
PSUM_GROUP = 4  # PSUM banks accumulated per stationary load; the next group uses the other 4
A_BLOCK_ROWS = 256  # rows of a streamed a^T block: two 128-row tiles. Larger blocks make the
#                    first matmuls wait longer and measured slower on the model (1024^3 bf16)
MAX_BLOCK_N = 4096  # columns of a resident b block
SBUF_SHARE = 0.85  # share of usable SBUF the resident loop plans for (allocation slack)
A_SHARE = 0.15  # share for one streamed a^T block (two in flight)
RES_BYTES = 3 * PSUM_GROUP * TILE_N * 4  # per partition: output tiles in flight (fp32 worst)
ADDEND_BYTES = 2 * MAX_BLOCK_N * 4  # per partition: row / full addend tiles (fp32)
STREAM_SHARE = 0.1  # share for one K chunk of both operands in the streamed-K loop


def gemm(out, a, b, *, c=None, alpha: float = 1.0, beta: float = 1.0) -> None:
    """``out = beta * c + alpha * (a @ b)``, batched, on the Tensor Engine.

    The contraction runs over partitions: each operand is brought into SBUF with K on the
    partition axis in the cheapest way its strides allow (a direct DMA when that layout is
    contiguous; otherwise a DMA transpose on NeuronCore-v3+, TensorE transposes on v2; see
    kernels/_kmajor.py). A block of ``b`` (all of K by up to 4096 columns) stays resident while
    ``a^T`` blocks stream past it; per 128-row tile the kernel accumulates over K into four
    512-wide PSUM banks (fp32) and evacuates them with the alpha/beta epilogue and the cast to
    out's dtype, alternating VectorE and ScalarE. When even one K x 512 block of ``b`` does not
    fit, K is streamed in chunks (both operands reloaded per output tile group).

    Dimensions:
        M, N, K: any sizes >= 1 (K = 0 gives beta * c, or zeros); ragged edges are partial tiles.
        batch: out's leading dims; a's and b's leading dims broadcast to them (numpy rules:
        missing or size-1 dims, or stride 0).

    Args:
        out: [..., M, N] HBM tensor, float32, bfloat16 or float16 (written entirely).
        a: [..., M, K] HBM tensor, float32, bfloat16 or float16; any strides.
        b: [..., K, N] HBM tensor of a's dtype; any strides.
        c: optional tensor broadcastable to out (bias [N], column [M, 1], a full matrix, ...).
        alpha, beta: Python floats. beta = 0 ignores c (NaN in c does not propagate, as torch).

    Notes:
        fp32 operands multiply on the PE array in fp32 (a quarter of the bf16 rate); bf16/fp16
        products accumulate in fp32 PSUM; the result is rounded once to out's dtype. A
        column-major out is computed as out^T = b^T a^T so the stores stay contiguous.
        Batches of small products (M, K <= 128, N <= 512, no addend) share loads, PSUM tiles,
        evacuations and stores (kernels/_gemm_batched.py): one matmul per entry.
        Epilogues: alpha * acc (copy or scale, VectorE/ScalarE alternating); + column c
        (per-partition bias, both engines); + row or full c (scalar_tensor_tensor on VectorE,
        with c pre-scaled by beta on ScalarE).
        On a multi-core launch (gemm[2], LNC=2) each core computes a disjoint share: whole
        batch entries, else 512-column (or 128-row) tile ranges of out (kernels/_cores.py).

    Pseudocode:
        for each batch entry, each resident block b[:, n0:n0+BN]:
          for each streamed block a^T[:, m0:m0+BM] (the next one loaded before these matmuls):
            for each 128-row tile, each group of 4 x 512 columns:
              psum = sum_k a^T[k, rows].T @ b[k, cols]
              out[rows, cols] = cast(alpha * psum + beta * c[rows, cols])
    """
    problems, k, dtype = plan(out, a, b, c, alpha, beta)
    problems = gemm_share(problems)  # gemm[2] (LNC=2): this core's part of the products
    if not problems:
        return
    epi = Epilogue(epilogue_kind(problems[0].c, beta), float(alpha), float(beta))
    run_gemm(problems, k, dtype, epi)


def run_gemm(problems, k: int, dtype, epi: Epilogue, batched: bool = True) -> None:
    """gemm's loops over planned problems (`plan`) with the epilogue `epi`: fused kernels
    (kernels/fused_linear.py) pass an Epilogue subclass; `batched=False` skips the
    small-batch path, whose stores do not go through `Epilogue.store`."""
    isz = dtype.itemsize
    kind = epi.kind
    a_mode, b_mode = kmajor_mode(problems[0].a_t), kmajor_mode(problems[0].b)
    if batched and batched_fits(problems, k, kind):
        gemm_batched(problems, epi, a_mode, b_mode)
        return
    sizes = _block_sizes(problems, k, kind, a_mode, isz)
    if sizes is None:
        _gemm_streamed(problems, k, epi, a_mode, b_mode, isz)
    else:
        _gemm_resident(problems, k, epi, a_mode, b_mode, sizes)


def _block_sizes(problems, k: int, kind: str, a_mode: str, isz: int):
    """(BM, BN, prefetch_b) of the resident loop, or None when not even one K x 512 block of
    b fits next to two a^T blocks (then K is streamed). Two b blocks are kept (the next one
    prefetched) when they fit, else one (its successor loads when it is needed)."""
    usable = nl.tile_size.total_available_sbuf_size
    m, n = problems[0].out.rows, problems[0].out.cols
    kt = max(1, -(-k // P_MAX))
    a_factor = 2 if a_mode == "pe_transpose" else 1  # transposes stage the rows once more
    bm = A_BLOCK_ROWS
    while bm > TILE_M and a_factor * kt * bm * isz > usable * A_SHARE:
        bm -= TILE_M
    if kind == "full":
        bm = TILE_M  # one [128, BN] addend tile per step
    bm = min(m, bm)
    other = RES_BYTES + (ADDEND_BYTES if kind in ("row", "full") else 0)
    budget = usable * SBUF_SHARE - 2 * a_factor * kt * bm * isz - other
    slab = kt * TILE_N * isz  # one K x 512 block of b
    if slab > budget:
        return None
    blocks = -(-n // TILE_N)
    if blocks <= MAX_BLOCK_N // TILE_N and blocks * slab <= budget and \
            len({p.b.off for p in problems}) == 1:
        return bm, n, True  # all of b resident, loaded once
    pair = int(budget // (2 * slab))
    if pair >= 1:
        return bm, min(n, MAX_BLOCK_N, pair * TILE_N), True
    return bm, min(n, MAX_BLOCK_N, int(budget // slab) * TILE_N), False


# ---------------------------------------------------------------- loop nests


def _n_tiles(width: int) -> list[int]:
    """Widths of the 512-column moving tiles covering `width` columns."""
    return [min(TILE_N, width - j) for j in range(0, width, TILE_N)]


def _matmuls(acc, a_sb, acol: int, mm: int, b_sb, bcol: int, widths, kts, first: bool) -> None:
    """acc[:mm, j*512 : +w_j] (+)= sum over K tiles (slot, kk) of a_sb.T @ b_sb tiles."""
    for i, (slot, kk) in enumerate(kts):
        stationary = a_sb[0:kk, slot, acol : acol + mm]
        for j, w in enumerate(widths):
            c0 = bcol + j * TILE_N
            nisa.nc_matmul(
                dst=acc[0:mm, j * TILE_N : j * TILE_N + w],
                stationary=stationary,
                moving=b_sb[0:kk, slot, c0 : c0 + w],
                accumulate=not (first and i == 0),
            )


def _k_slots(nk: int) -> list[tuple[int, int]]:
    """(column, rows) of each K tile of a block holding nk contraction rows."""
    return [(t, min(P_MAX, nk - t * P_MAX)) for t in range(-(-nk // P_MAX))]


def _zero_acc(acc, mm: int, gw: int) -> None:
    """K = 0: the product is zero (no matmul writes the accumulator)."""
    nisa.memset(dst=acc[0:mm, 0:gw], value=0.0)


def _gemm_resident(problems, k, epi, a_mode, b_mode, sizes) -> None:
    """Resident b blocks, streamed a^T blocks (the loop nest of kernels/matmul.py, ragged)."""
    m, n = problems[0].out.rows, problems[0].out.cols
    bm, bn, prefetch_b = sizes
    steps = [
        (pi, n0, m0, mw) for pi in range(len(problems)) for n0 in range(0, n, bn)
        for m0, mw in _row_blocks(m, bm)
    ]
    cache: dict[str, tuple[Any, Any]] = {}

    def b_block(p, n0, pieces):
        bw = min(bn, n - n0)
        return _cached(cache, "b", (p.b.off, n0), pieces, lambda: _block(p.b, k, n0, bw, b_mode))

    def load(step):
        pi, n0, m0, mw = step
        p = problems[pi]
        pieces: list[list] = []
        hit = cache.get("b")
        if prefetch_b or hit is None or hit[0] == (p.b.off, n0):
            b_t = b_block(p, n0, pieces)
        else:  # only one b block fits: load this one when the previous one is released
            b_t = None
        a_t = _cached(cache, "a", (p.a_t.off, m0, mw), pieces,
                      lambda: _block(p.a_t, k, m0, mw, a_mode))
        _interleave(pieces)
        return {"b": b_t, "a": a_t, "c": epi.load_block(p.c, cache, m0, mw, n0, min(bn, n - n0))}

    bank_no = 0
    for (pi, n0, m0, mw), tiles in _prefetched(steps, load):
        p = problems[pi]
        if tiles["b"] is None:
            cache.pop("b", None)
            pieces: list[list] = []
            tiles["b"] = b_block(p, n0, pieces)
            _interleave(pieces)
        widths = _n_tiles(min(bn, n - n0))
        for mt in nl.affine_range(-(-mw // TILE_M)):
            mm = min(TILE_M, mw - mt * TILE_M)
            r0 = m0 + mt * TILE_M
            for g in nl.affine_range(-(-len(widths) // PSUM_GROUP)):
                gws = widths[g * PSUM_GROUP : (g + 1) * PSUM_GROUP]
                c0 = g * PSUM_GROUP * TILE_N
                acc = nl.ndarray((TILE_M, sum(gws)), dtype=nl.float32, buffer=nl.psum,
                                 name="gemm_acc")
                if k:
                    _matmuls(acc, tiles["a"], mt * TILE_M, mm, tiles["b"], c0, gws,
                             _k_slots(k), True)
                else:
                    _zero_acc(acc, mm, sum(gws))
                ctile = epi.tile_for(p.c, tiles["c"], mt, mm, c0, sum(gws))
                _evacuate_store(epi, p.out, acc, ctile, mm, r0, n0 + c0, gws, bank_no)
                bank_no += len(gws)
                del acc
        # Release this step's tiles before the generator allocates the step after next.
        del tiles


def _row_blocks(m: int, bm: int) -> list[tuple[int, int]]:
    """(first row, rows) of the streamed a^T blocks: one 128-row tile first when there are
    several blocks, so the first matmuls wait for 128 rows of a rather than a whole block."""
    if m <= bm:
        return [(0, m)]
    blocks = [(0, TILE_M)]
    blocks += [(r, min(bm, m - r)) for r in range(TILE_M, m, bm)]
    return blocks


def _evacuate_store(epi, out: Mat, acc, ctile, mm, r0, col, widths, bank_no) -> None:
    """PSUM -> SBUF through the epilogue, bank by bank on alternating engines, then one store
    DMA for the group."""
    gw = sum(widths)
    res = nl.ndarray((TILE_M, gw), dtype=out.t.dtype, buffer=nl.sbuf, name="gemm_res")
    for j, w in enumerate(widths):
        engine = nisa.engine.vector if (bank_no + j) % 2 == 0 else nisa.engine.scalar
        cols = slice(j * TILE_N, j * TILE_N + w)
        part = None if ctile is None else (ctile if epi.kind == "column" else ctile[:, cols])
        epi.apply(res[0:mm, cols], acc[0:mm, cols], engine, part)
    epi.store(out, res, mm, r0, col, gw)


def _block(mat: Mat, k: int, w0: int, w: int, mode: str, split: int = PSUM_GROUP * TILE_N):
    """An SBUF tile [128, KT, w] for all K rows of columns w0..w0+w of a [K, W] operand, and
    the thunks that load it (kmajor_pieces), `split` columns at a time (in the order the
    matmul groups use them) and K group by K group within."""
    t = nl.ndarray((P_MAX, max(1, -(-k // P_MAX)), w), dtype=mat.t.dtype, buffer=nl.sbuf,
                   name="gemm_opnd")
    pieces = []
    if k:
        for c in range(0, w, split):
            cw = min(split, w - c)
            pieces += kmajor_pieces(t[:, :, c : c + cw], mat, 0, k, w0 + c, cw, mode)
    return t, pieces


def _cached(cache: dict, slot: str, key, pieces: list, make):
    """The tile of `slot` for `key`: reused when the previous step loaded the same one (batch
    broadcast, or a resident block shared by consecutive steps); a new one's load thunks are
    appended to `pieces`."""
    hit = cache.get(slot)
    if hit is not None and hit[0] == key:
        return hit[1]
    t, thunks = make()
    pieces.append(thunks)
    cache[slot] = (key, t)
    return t


def _interleave(pieces: list[list]) -> None:
    """Issue the load thunks of several operands alternately, K group by K group."""
    for group in itertools.zip_longest(*pieces):
        for thunk in group:
            if thunk is not None:
                thunk()


def _prefetched(steps, load):
    """Yield (step, tiles); the loads of step i+1 are issued before the caller's work on step i
    (the DMA queue is in order: a load issued after step i's stores would wait for them).
    The caller drops its reference to step i's tiles before asking for step i+1, so at most
    two steps' tiles are alive."""
    if not steps:
        return
    nxt = load(steps[0])
    for i, step in enumerate(steps):
        cur = nxt
        if i + 1 < len(steps):
            nxt = load(steps[i + 1])
        yield step, cur


def _gemm_streamed(problems, k, epi, a_mode, b_mode, isz) -> None:
    """K too large for a resident K x 512 block: per output tile group, stream K in chunks of
    both operands (each reloaded per group), accumulating in PSUM across chunks."""
    m, n = problems[0].out.rows, problems[0].out.cols
    usable = nl.tile_size.total_available_sbuf_size
    group_cols = PSUM_GROUP * TILE_N
    per_tile = (TILE_M + group_cols) * isz * (2 if "pe_transpose" in (a_mode, b_mode) else 1)
    kc = max(1, int(usable * STREAM_SHARE) // per_tile) * P_MAX  # rows per chunk
    steps = [
        (pi, r0, c0, k0) for pi in range(len(problems)) for r0 in range(0, m, TILE_M)
        for c0 in range(0, n, group_cols) for k0 in range(0, k, kc)
    ]

    def load(step):
        pi, r0, c0, k0 = step
        p = problems[pi]
        nk, mm, gw = min(kc, k - k0), min(TILE_M, m - r0), min(group_cols, n - c0)
        kt = -(-nk // P_MAX)
        a_sb = nl.ndarray((P_MAX, kt, mm), dtype=p.a_t.t.dtype, buffer=nl.sbuf, name="gemm_ak")
        b_sb = nl.ndarray((P_MAX, kt, gw), dtype=p.b.t.dtype, buffer=nl.sbuf, name="gemm_bk")
        _interleave([
            kmajor_pieces(a_sb, p.a_t, k0, nk, r0, mm, a_mode),
            kmajor_pieces(b_sb, p.b, k0, nk, c0, gw, b_mode),
        ])
        return a_sb, b_sb

    cache: dict[str, tuple[Any, Any]] = {}
    acc = None
    bank_no = 0
    for (pi, r0, c0, k0), chunk in _prefetched(steps, load):
        a_sb, b_sb = chunk
        p = problems[pi]
        nk, mm, gw = min(kc, k - k0), min(TILE_M, m - r0), min(group_cols, n - c0)
        if k0 == 0:
            acc = nl.ndarray((TILE_M, gw), dtype=nl.float32, buffer=nl.psum, name="gemm_acc")
        _matmuls(acc, a_sb, 0, mm, b_sb, 0, _n_tiles(gw), _k_slots(nk), k0 == 0)
        if k0 + kc >= k:
            widths = _n_tiles(gw)
            ctile = epi.tile_for(p.c, epi.load_block(p.c, cache, r0, mm, c0, gw), 0, mm, 0, gw)
            _evacuate_store(epi, p.out, acc, ctile, mm, r0, c0, widths, bank_no)
            bank_no += len(widths)
            acc = None
        del chunk, a_sb, b_sb


# ---------------------------------------------------------------- reference


def gemm_ref(a, b, c=None, alpha: float = 1.0, beta: float = 1.0) -> np.ndarray:
    """beta * c + alpha * (a @ b) in float64, numpy broadcasting (beta = 0 ignores c)."""
    prod = np.matmul(np.asarray(a, np.float64), np.asarray(b, np.float64))
    out = alpha * prod
    if c is not None and beta != 0:
        out = out + beta * np.asarray(c, np.float64)
    return out
