"""The convolution loop nest shared by conv2d and its input gradient: implicit im2col.

Layer: kernel library; public NKI API only. A "virtual" correlation out[n, o, y, x] =
sum_{c, i, j} z[n, c, y*sh + i*dh, x*sw + j*dw] * W[o, c, i, j] (+ bias[o]) is computed where
z is a zero-padded and possibly zero-dilated copy of the input, built band by band in SBUF:
real row r lands at virtual row r*ins + off (forward: ins 1, off = padding; input gradient:
ins = stride, off = (k-1)*dilation - padding, weights flipped). The moving operand of each
matmul is a strided window of the band (no im2col copy); the stationary is W^T for one tap
(input channels on partitions, output channels on the free axis), resident in SBUF.
"""

from __future__ import annotations

from dataclasses import dataclass

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

from ._common import scalar_copy
from ._conv_weights import ConvWeights, OutBlock

TILE_FREE = 512  # output positions per matmul: 512 fp32 fill one PSUM bank
PSUM_GROUP = 4  # position tiles accumulated per stationary load (four PSUM banks)
BAND_SHARE = 0.3  # share of usable SBUF for the input bands of one band of positions


@dataclass(frozen=True)
class Axis:
    """One spatial axis of the virtual correlation."""

    out: int  # output size
    k: int  # kernel size
    stride: int
    dil: int
    real: int  # real input size
    ins: int  # real index r sits at virtual index r * ins + off
    off: int

    def span(self, n_out: int) -> int:
        """Virtual input extent read by n_out consecutive outputs."""
        return (n_out - 1) * self.stride + (self.k - 1) * self.dil + 1

    def real_range(self, v0: int, v1: int) -> tuple[int, int, int]:
        """(first real index, count, first virtual index) of the real entries in [v0, v1)."""
        lo = max(0, -(-(v0 - self.off) // self.ins))
        hi = min(self.real - 1, (v1 - 1 - self.off) // self.ins)
        if hi < lo:
            return 0, 0, v0
        return lo, hi - lo + 1, lo * self.ins + self.off


@dataclass(frozen=True)
class Tile:
    """A block of output positions: images n0.., rows r0.., columns c0.. (<= 512)."""

    n0: int
    nb: int
    r0: int
    nr: int
    c0: int
    nc: int

    @property
    def size(self) -> int:
        return self.nb * self.nr * self.nc


def tiles(n: int, ya: Axis, xa: Axis, free: int = TILE_FREE) -> list[list[Tile]]:
    """Position tiles of at most `free` positions grouped into bands (tiles of a band share
    one input band, at most PSUM_GROUP of them)."""
    oh, ow = ya.out, xa.out
    bands = []
    if oh * ow <= free:
        nb = min(n, free // (oh * ow))
        tiles = [Tile(i, min(nb, n - i), 0, oh, 0, ow) for i in range(0, n, nb)]
        for i in range(0, len(tiles), PSUM_GROUP):
            bands.append(tiles[i : i + PSUM_GROUP])
    elif ow <= free:
        nr = free // ow
        for img in range(n):
            tiles = [Tile(img, 1, r, min(nr, oh - r), 0, ow) for r in range(0, oh, nr)]
            for i in range(0, len(tiles), PSUM_GROUP):
                bands.append(tiles[i : i + PSUM_GROUP])
    else:
        for img in range(n):
            for r in range(oh):
                tiles = [Tile(img, 1, r, 1, c, min(free, ow - c)) for c in range(0, ow, free)]
                for i in range(0, len(tiles), PSUM_GROUP):
                    bands.append(tiles[i : i + PSUM_GROUP])
    return bands


def load_band(src, c0: int, cn: int, band: list[Tile], ya: Axis, xa: Axis, dtype):
    """SBUF tile [cn, nb, rows, cols] of the virtual input for a band: virtual rows from the
    band's first output row, columns from its first output column; zeros where no real
    element lands (padding, dilation by the stride)."""
    t0, t1 = band[0], band[-1]
    n0, nb = t0.n0, t1.n0 + t1.nb - t0.n0
    r_first, r_last = t0.r0, max(t.r0 + t.nr for t in band)
    c_first, c_last = t0.c0, max(t.c0 + t.nc for t in band)
    v0 = r_first * ya.stride
    rows = ya.span(r_last - r_first)
    w0 = c_first * xa.stride
    cols = xa.span(c_last - c_first)
    tile = nl.ndarray((cn, nb, rows, cols), dtype=dtype, buffer=nl.sbuf, name="conv_band")
    rr, nrr, vr = ya.real_range(v0, v0 + rows)
    cc, ncc, vc = xa.real_range(w0, w0 + cols)
    full = ya.ins == 1 and xa.ins == 1 and nrr == rows and ncc == cols
    if not full:
        nisa.memset(dst=tile, value=0.0, engine=nisa.engine.gpsimd)
    if nrr and ncc:
        st = [int(s) for s in src.strides]
        view = src.ap([[st[1], cn], [st[0], nb], [st[2], nrr], [st[3], ncc]],
                      offset=int(src.offset) + n0 * st[0] + c0 * st[1] + rr * st[2] + cc * st[3])
        r_sl = slice(vr - v0, vr - v0 + (nrr - 1) * ya.ins + 1, ya.ins)
        c_sl = slice(vc - w0, vc - w0 + (ncc - 1) * xa.ins + 1, xa.ins)
        nisa.dma_copy(dst=tile[:, :, r_sl, c_sl], src=view)
    return tile, (n0, r_first, c_first)


def window(band_tile, origin, t: Tile, i: int, j: int, ya: Axis, xa: Axis, cn: int):
    """The moving operand of tap (i, j) for tile t: a strided view of the band."""
    n0, r_first, c_first = origin
    r = (t.r0 - r_first) * ya.stride + i * ya.dil
    c = (t.c0 - c_first) * xa.stride + j * xa.dil
    return band_tile[0:cn, t.n0 - n0 : t.n0 - n0 + t.nb,
                     r : r + (t.nr - 1) * ya.stride + 1 : ya.stride,
                     c : c + (t.nc - 1) * xa.stride + 1 : xa.stride]


def correlate(out, src, weights: ConvWeights, bias, ya: Axis, xa: Axis) -> None:
    """out[n, o, y, x] = the virtual correlation of `src` (an [N, C, H, W] HBM view) with
    `weights` (+ bias[o], an HBM [O] view or None); out is an [N, O, OH, OW] HBM view."""
    n = int(out.shape[0])
    bands = tiles(n, ya, xa)
    evac = 0
    budget = nl.tile_size.total_available_sbuf_size * BAND_SHARE
    for chunk in weights.chunks():
        w_tiles = {id(ob): weights.load(ob) for ob in chunk}
        b_cols = {id(ob): _bias_col(bias, ob) for ob in chunk} if bias is not None else {}
        cis = sorted({ct for ob in chunk for ct in ob.ci_tiles})
        for band in bands:
            # Every block's input-channel bands loaded once when they fit (dense blocks share
            # them); otherwise each block loads its own as its matmuls reach them.
            shared = len(cis) * _band_bytes(band, ya, xa, src.dtype.itemsize) <= budget
            loaded = {ct: load_band(src, *ct, band, ya, xa, src.dtype) for ct in cis} if shared \
                else None
            for ob in chunk:
                evac = _block(out, ob, w_tiles[id(ob)], b_cols.get(id(ob)), loaded, band,
                              weights, ya, xa, evac, src)


def _band_bytes(band: list[Tile], ya: Axis, xa: Axis, isz: int) -> int:
    t0, t1 = band[0], band[-1]
    nb = t1.n0 + t1.nb - t0.n0
    rows = ya.span(max(t.r0 + t.nr for t in band) - t0.r0)
    cols = xa.span(max(t.c0 + t.nc for t in band) - t0.c0)
    return nb * rows * cols * isz


def _block(out, ob: OutBlock, w_sb, b_col, loaded, band, weights, ya, xa, evac, src) -> int:
    """The matmuls, evacuation and stores of one output block for one band."""
    co0, con = ob.co0, ob.co_n
    accs = [nl.ndarray((128, t.nb, t.nr, t.nc), dtype=nl.float32, buffer=nl.psum,
                       name="conv_acc") for t in band]
    steps = [(ti, i, j) for ti in range(len(ob.ci_tiles)) for i in range(ya.k)
             for j in range(xa.k)]
    own = None
    for s, (ti, i, j) in enumerate(steps):
        c0, cn = ob.ci_tiles[ti]
        if loaded is not None:
            band_tile, origin = loaded[(c0, cn)]
        elif own is None or own[0] != ti:
            own = (ti, load_band(src, c0, cn, band, ya, xa, src.dtype))
            band_tile, origin = own[1]
        stationary = w_sb[0:cn, ti, 0:con, weights.tap(i, j)]
        for acc, t in zip(accs, band, strict=True):
            nisa.nc_matmul(dst=acc[0:con], stationary=stationary,
                           moving=window(band_tile, origin, t, i, j, ya, xa, cn),
                           accumulate=s > 0)
    st = [int(x) for x in out.strides]
    for acc, t in zip(accs, band, strict=True):
        res = nl.ndarray((128, t.nb, t.nr, t.nc), dtype=out.dtype, buffer=nl.sbuf,
                         name="conv_res")
        scalar = evac % 2 == 1
        if b_col is None:
            if scalar:
                scalar_copy(res[0:con], acc[0:con])
            else:
                nisa.tensor_copy(dst=res[0:con], src=acc[0:con])
        elif scalar:
            nisa.activation(dst=res[0:con], op=nl.copy, data=acc[0:con], bias=b_col[0:con, :])
        else:
            nisa.tensor_scalar(dst=res[0:con], data=acc[0:con], op0=nl.add,
                               operand0=b_col[0:con, :])
        evac += 1
        dst = out.ap([[st[1], con], [st[0], t.nb], [st[2], t.nr], [st[3], t.nc]],
                     offset=int(out.offset) + t.n0 * st[0] + co0 * st[1] + t.r0 * st[2]
                     + t.c0 * st[3])
        nisa.dma_copy(dst=dst, src=res[0:con])
    return evac


def _bias_col(bias, ob: OutBlock):
    """bias[co0 : co0 + co_n] as an fp32 [co_n, 1] column (the DMA casts)."""
    col = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf, name="conv_bias")
    s = int(bias.strides[0])
    nisa.dma_copy(dst=col[0:ob.co_n, :],
                  src=bias.ap([[s, ob.co_n], [1, 1]], offset=int(bias.offset) + ob.co0 * s))
    return col
