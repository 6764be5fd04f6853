"""Weight and bias gradients of conv2d. Layer: kernel library; public NKI API only.

dW[o, c, i, j] = sum over images and output positions of dY[n, o, y, x] * Z[n, c, y*sh + i*dh,
x*sw + j*dw] (Z the zero-padded input). The contraction runs over output positions, so both
operands need positions on partitions: per tile of <= 128 positions, TensorE transposes the
dY tile ([o, positions] -> [positions, o]) and each tap's input window ([c, positions] ->
[positions, c]); the products accumulate in PSUM over every position of the batch, one bank
per 512 (tap, input channel) columns. Groups packed into one block are computed as one dense block
and their block diagonal extracted when stored.
"""

from __future__ import annotations

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

from ._common import scalar_copy
from ._conv_core import Axis, Tile, load_band, tiles, window
from ._conv_weights import P_MAX, ConvWeights, OutBlock

POS_TILE = 128  # output positions per transposed tile (partitions)
CI_CHUNK = 512  # (tap, input channel) columns per matmul: moving free size, one PSUM bank
PSUM_ACCS = 4  # PSUM banks of dW accumulators in flight


def grad_bias(db, dy) -> None:
    """db[o] = sum over n, y, x of dy[n, o, y, x]: per channel block, row sums on VectorE of
    [o, images, positions] chunks, accumulated in an fp32 column."""
    n, co, oh, ow = (int(s) for s in dy.shape)
    st = [int(s) for s in dy.strides]
    per_img = oh * ow
    imgs = max(1, min(n, 4096 // per_img)) if per_img <= 4096 else 1
    rows = oh if per_img <= 4096 else max(1, 4096 // ow)
    sb = int(db.strides[0])
    for c0 in range(0, co, P_MAX):
        cn = min(P_MAX, co - c0)
        acc = nl.ndarray((P_MAX, 1), dtype=nl.float32, buffer=nl.sbuf, name="db_acc")
        first = True
        for n0 in range(0, n, imgs):
            nb = min(imgs, n - n0)
            for r0 in range(0, oh, rows):
                nr = min(rows, oh - r0)
                t = nl.ndarray((P_MAX, nb, nr, ow), dtype=dy.dtype, buffer=nl.sbuf, name="db_in")
                nisa.dma_copy(dst=t[0:cn], src=dy.ap(
                    [[st[1], cn], [st[0], nb], [st[2], nr], [st[3], ow]],
                    offset=int(dy.offset) + n0 * st[0] + c0 * st[1] + r0 * st[2]))
                part = acc if first else nl.ndarray((P_MAX, 1), dtype=nl.float32,
                                                     buffer=nl.sbuf, name="db_part")
                nisa.tensor_reduce(dst=part[0:cn], op=nl.add, data=t[0:cn], axis=(1, 2, 3))
                if not first:
                    nisa.tensor_tensor(dst=acc[0:cn], data1=acc[0:cn], data2=part[0:cn],
                                       op=nl.add)
                first = False
        nisa.dma_copy(dst=db.ap([[sb, cn], [1, 1]], offset=int(db.offset) + c0 * sb),
                      src=acc[0:cn])


def grad_weight(dw, dy, x, weights: ConvWeights, ya: Axis, xa: Axis) -> None:
    """dw (the [Cout, Cin/groups, kh, kw] HBM view) of the correlation described by
    `weights` (forward layout), `ya`, `xa` (forward axes over the real input x)."""
    n = int(dy.shape[0])
    bands = tiles(n, ya, xa, POS_TILE)
    taps = weights.taps
    for ob in weights.blocks():
        c_total = sum(cn for _, cn in ob.ci_tiles)
        dw_sb = nl.ndarray((P_MAX, c_total, taps), dtype=nl.float32, buffer=nl.sbuf,
                           name="dw_full")
        chunks = _column_chunks(ob, taps)
        for u in range(0, len(chunks), PSUM_ACCS):
            _unit(dw_sb, chunks[u : u + PSUM_ACCS], ob, dy, x, bands, weights, ya, xa)
        _store(dw, dw_sb, ob, weights)


def _column_chunks(ob: OutBlock, taps: int) -> list[list[tuple[int, int, int, int]]]:
    """The moving columns of the dW matmuls: (tap, c0, cn, block column of c0) for every
    tap and input-channel tile, in chunks of <= 512 columns (one PSUM bank each), so small
    channel counts put several taps in one matmul."""
    cols, k = [], 0
    for c0, cn in ob.ci_tiles:
        for tap in range(taps):
            cols.append((tap, c0, cn, k))
        k += cn
    chunks, cur, width = [], [], 0
    for col in cols:
        if cur and width + col[2] > CI_CHUNK:
            chunks.append(cur)
            cur, width = [], 0
        cur.append(col)
        width += col[2]
    if cur:
        chunks.append(cur)
    return chunks


def _unit(dw_sb, chunks, ob: OutBlock, dy, x, bands, weights, ya, xa) -> None:
    """dW for the columns of `chunks` accumulated in PSUM over every position band."""
    con = ob.co_n
    widths = [sum(cn for _, _, cn, _ in ch) for ch in chunks]
    accs = [nl.ndarray((P_MAX, w), dtype=nl.float32, buffer=nl.psum, name="dw_acc")
            for w in widths]
    c_tiles = sorted({(c0, cn) for ch in chunks for _, c0, cn, _ in ch})
    first = True
    for band in bands:
        dy_band, dy_org = _dy_band(dy, ob.co0, con, band)
        x_bands = {c0: load_band(x, c0, cn, band, ya, xa, x.dtype) for c0, cn in c_tiles}
        for t in band:
            pos = t.size
            dy_t = _transposed(_sub(dy_band, dy_org, t, con), pos, con, dy.dtype, "dyT")
            for a, ch, w in zip(accs, chunks, widths, strict=True):
                xw = nl.ndarray((P_MAX, w), dtype=x.dtype, buffer=nl.psum, name="xwT_ps")
                col = 0
                for tap, c0, cn, _ in ch:
                    i, j = divmod(tap, weights.kw)
                    b, org = x_bands[c0]
                    nisa.nc_transpose(dst=xw[0:pos, col : col + cn],
                                      data=window(b, org, t, i, j, ya, xa, cn),
                                      engine=nisa.engine.tensor)
                    col += cn
                xw_sb = nl.ndarray((P_MAX, w), dtype=x.dtype, buffer=nl.sbuf, name="xwT")
                nisa.tensor_copy(dst=xw_sb[0:pos], src=xw[0:pos])
                del xw
                nisa.nc_matmul(dst=a[0:con, 0:w], stationary=dy_t[0:pos, 0:con],
                               moving=xw_sb[0:pos, 0:w], accumulate=not first)
            first = False
    for a, ch in zip(accs, chunks, strict=True):
        col = 0
        for tap, _, cn, k in ch:
            scalar_copy(dw_sb[0:con, k : k + cn, tap], a[0:con, col : col + cn])
            col += cn


def _dy_band(dy, co0: int, con: int, band: list[Tile]):
    """The band's bounding box of dy: SBUF [con, images, rows, cols], and its origin."""
    t0, t1 = band[0], band[-1]
    n0, nb = t0.n0, t1.n0 + t1.nb - t0.n0
    r0, nr = t0.r0, max(t.r0 + t.nr for t in band) - t0.r0
    c0, nc = t0.c0, max(t.c0 + t.nc for t in band) - t0.c0
    st = [int(s) for s in dy.strides]
    tile = nl.ndarray((P_MAX, nb, nr, nc), dtype=dy.dtype, buffer=nl.sbuf, name="dy_band")
    nisa.dma_copy(dst=tile[0:con], src=dy.ap(
        [[st[1], con], [st[0], nb], [st[2], nr], [st[3], nc]],
        offset=int(dy.offset) + n0 * st[0] + co0 * st[1] + r0 * st[2] + c0 * st[3]))
    return tile, (n0, r0, c0)


def _sub(tile, org, t: Tile, con: int):
    n0, r0, c0 = org
    return tile[0:con, t.n0 - n0 : t.n0 - n0 + t.nb, t.r0 - r0 : t.r0 - r0 + t.nr,
                t.c0 - c0 : t.c0 - c0 + t.nc]


def _transposed(view, pos: int, rows: int, dtype, name: str):
    """[rows, pos] SBUF view -> SBUF [pos, rows] (TensorE transpose, VectorE copy)."""
    ps = nl.ndarray((P_MAX, P_MAX), dtype=dtype, buffer=nl.psum, name=name + "_ps")
    nisa.nc_transpose(dst=ps[0:pos, 0:rows], data=view, engine=nisa.engine.tensor)
    sb = nl.ndarray((P_MAX, P_MAX), dtype=dtype, buffer=nl.sbuf, name=name)
    scalar_copy(sb[0:pos, 0:rows], ps[0:pos, 0:rows])
    return sb


def _store(dw, dw_sb, ob: OutBlock, weights: ConvWeights) -> None:
    """Write the block's dW: dense blocks directly; packed groups their diagonal blocks."""
    st = [int(s) for s in dw.strides]
    kh, kw = weights.kh, weights.kw
    cin_g, cout_g = weights.vci_g, weights.vco_g
    out = nl.ndarray((P_MAX, dw_sb.shape[1], kh * kw), dtype=dw.dtype, buffer=nl.sbuf,
                     name="dw_out")
    if ob.dense:
        nisa.tensor_copy(dst=out[0:ob.co_n], src=dw_sb[0:ob.co_n])
        c_base = ob.ci_tiles[0][0] - ob.g0 * cin_g
        cn = dw_sb.shape[1]
        nisa.dma_copy(dst=dw.ap([[st[0], ob.co_n], [st[1], cn], [st[2], kh], [st[3], kw]],
                                offset=int(dw.offset) + ob.co0 * st[0] + c_base * st[1]),
                      src=out[0:ob.co_n])
        return
    if cin_g == 1 and cout_g == 1:
        # Depthwise: keep dW_full[o, c] where c == o, then sum over c (one element per row).
        con = ob.co_n
        diag = nl.ndarray((P_MAX, con, kh * kw), dtype=nl.float32, buffer=nl.sbuf,
                          name="dw_diag")
        nisa.affine_select(dst=diag[0:con], pattern=[[-1, con], [0, kh * kw]],
                           channel_multiplier=1, on_true_tile=dw_sb[0:con, 0:con],
                           on_false_value=0.0, cmp_op=nl.equal, offset=0)
        nisa.tensor_reduce(dst=out[0:con, 0, :], op=nl.add,
                           data=diag[0:con].permute((0, 2, 1)), axis=2)
        nisa.dma_copy(dst=dw.ap([[st[0], con], [st[2], kh], [st[3], kw]],
                                offset=int(dw.offset) + ob.co0 * st[0]), src=out[0:con, 0, :])
        return
    nisa.tensor_copy(dst=out[0:ob.co_n], src=dw_sb[0:ob.co_n])
    for gl in range(ob.ng):
        rows = slice(gl * cout_g, (gl + 1) * cout_g)
        cols = slice(gl * cin_g, (gl + 1) * cin_g)
        nisa.dma_copy(dst=dw.ap([[st[0], cout_g], [st[1], cin_g], [st[2], kh], [st[3], kw]],
                                offset=int(dw.offset) + (ob.co0 + gl * cout_g) * st[0]),
                      src=out[rows, cols, :])
