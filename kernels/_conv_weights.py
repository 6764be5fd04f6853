"""Convolution weights as matmul stationaries: output blocks, and W^T tiles in SBUF.

Layer: kernel library; public NKI API only. The virtual weight V[o, c, i, j] of a correlation
(conv2d: the weight itself; its input gradient: the weight with in/out channels swapped per
group and the taps flipped) is held per output block as an SBUF tile [128, T, co_n, taps]:
partition p of column t is input channel ci_tiles[t] + p, free (o, tap) the block's output
channels. Dense blocks (one group) load W^T directly when the virtual layout has contiguous
(o, tap) runs, else load contiguous weight rows and turn them with TensorE transposes.
Several small groups share one block with a block-diagonal stationary (zeros between groups):
depthwise (one input channel per group) by one affine_select, others by one DMA per group.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

from ._common import scalar_copy

P_MAX = 128  # partitions (pmax): input channels per contraction tile
CO_MAX = 128  # output channels per block (gemm_stationary_fmax)
W_SHARE = 0.3  # share of usable SBUF for the resident weight tiles of one chunk of blocks


@dataclass
class OutBlock:
    """Output channels co0.. (co_n) computed from input channel tiles [(c0, cn), ...]; groups
    g0..g0+ng packed block-diagonally when ng > 1 (dense blocks have ng = 1)."""

    co0: int
    co_n: int
    ci_tiles: list[tuple[int, int]]
    g0: int
    ng: int
    dense: bool
    j0: int = 0  # first output channel within the group (dense blocks)
    extra: dict = field(default_factory=dict)


class ConvWeights:
    """The virtual weight of a correlation and its SBUF stationaries.

    `w` is the [Cout, Cin/groups, kh, kw] HBM weight. transposed=False: V = w (Cout = vco);
    transposed=True: V[g*cin_g + c, o, i, j] = w[g*cout_g + o, c, kh-1-i, kw-1-j]."""

    def __init__(self, w, groups: int, transposed: bool):
        self.w = w
        self.groups = groups
        self.transposed = transposed
        cout, cin_g, self.kh, self.kw = (int(s) for s in w.shape)
        cout_g = cout // groups
        self.vco_g, self.vci_g = (cin_g, cout_g) if transposed else (cout_g, cin_g)
        st = [int(s) for s in w.strides]
        self.s2, self.s3 = st[2], st[3]
        # Strides of V's (input channel within group, output channel within group) axes, and of
        # its group axis.
        if transposed:
            self.ps, self.js, self.gs = st[0], st[1], cout_g * st[0]
        else:
            self.ps, self.js, self.gs = st[1], st[0], cout_g * st[0]

    @property
    def taps(self) -> int:
        return self.kh * self.kw

    def tap(self, i: int, j: int) -> int:
        """Weight tap of window tap (i, j) (flipped for the input gradient)."""
        if self.transposed:
            return (self.kh - 1 - i) * self.kw + (self.kw - 1 - j)
        return i * self.kw + j

    def view(self, g: int, p0: int, np_: int, j0: int, nj: int):
        """HBM view [np_, nj, kh, kw] of V[g's input channels p0.., output channels j0..]."""
        off = int(self.w.offset) + g * self.gs + p0 * self.ps + j0 * self.js
        return self.w.ap([[self.ps, np_], [self.js, nj], [self.s2, self.kh], [self.s3, self.kw]],
                         offset=off)

    # ------------------------------------------------------------ blocks
    def blocks(self) -> list[OutBlock]:
        g_n, vci, vco = self.groups, self.vci_g, self.vco_g
        if g_n > 1 and vci <= P_MAX and vco <= CO_MAX:
            per = max(1, min(P_MAX // vci, CO_MAX // vco))
            out = []
            for g0 in range(0, g_n, per):
                ng = min(per, g_n - g0)
                out.append(OutBlock(g0 * vco, ng * vco, [(g0 * vci, ng * vci)], g0, ng, False))
            return out
        out = []
        for g in range(g_n):
            tiles = [(g * vci + c, min(P_MAX, vci - c)) for c in range(0, vci, P_MAX)]
            for j in range(0, vco, CO_MAX):
                out.append(OutBlock(g * vco + j, min(CO_MAX, vco - j), tiles, g, 1, True, j))
        return out

    def chunks(self) -> list[list[OutBlock]]:
        """Blocks in chunks whose weight tiles fit W_SHARE of SBUF together."""
        budget = nl.tile_size.total_available_sbuf_size * W_SHARE
        isz = self.w.dtype.itemsize
        chunks, cur, used = [], [], 0
        for ob in self.blocks():
            size = len(ob.ci_tiles) * ob.co_n * self.taps * isz
            if cur and used + size > budget:
                chunks.append(cur)
                cur, used = [], 0
            cur.append(ob)
            used += size
        if cur:
            chunks.append(cur)
        return chunks

    # ------------------------------------------------------------ loads
    def load(self, ob: OutBlock):
        """The block's stationaries: SBUF [128, T, co_n, taps] (see the module docstring)."""
        t = nl.ndarray((P_MAX, len(ob.ci_tiles), ob.co_n, self.taps), dtype=self.w.dtype,
                       buffer=nl.sbuf, name="conv_w")
        if ob.dense:
            self._load_dense(t, ob)
        elif self.vci_g == 1:
            self._load_depthwise(t, ob)
        else:
            nisa.memset(dst=t, value=0.0, engine=nisa.engine.gpsimd)
            for gl in range(ob.ng):
                rows = slice(gl * self.vci_g, (gl + 1) * self.vci_g)
                cols = slice(gl * self.vco_g, (gl + 1) * self.vco_g)
                nisa.dma_copy(dst=t[rows, 0, cols, :],
                              src=self.view(ob.g0 + gl, 0, self.vci_g, 0, self.vco_g))
        return t

    def _direct_runs(self) -> bool:
        """V's (output channel, tap) axes are one contiguous run per input channel."""
        return self.s3 == 1 and self.s2 == self.kw and self.js == self.taps

    def _load_dense(self, t, ob: OutBlock) -> None:
        g, c_base = ob.g0, ob.g0 * self.vci_g
        for ti, (c0, cn) in enumerate(ob.ci_tiles):
            if self._direct_runs():
                nisa.dma_copy(dst=t[0:cn, ti, :, :],
                              src=self.view(g, c0 - c_base, cn, ob.j0, ob.co_n))
            else:
                self._load_transposed(t, ti, g, c0 - c_base, cn, ob)

    def _load_transposed(self, t, ti: int, g: int, p0: int, cn: int, ob: OutBlock) -> None:
        """W^T of one input-channel tile by TensorE transposes of contiguous weight rows
        (output channels on partitions), four taps per PSUM bank."""
        taps, con = self.taps, ob.co_n
        rows = nl.ndarray((CO_MAX, cn, taps), dtype=self.w.dtype, buffer=nl.sbuf, name="conv_wr")
        src = self.view(g, p0, cn, ob.j0, con).permute((1, 0, 2, 3))
        nisa.dma_copy(dst=rows[0:con], src=src)
        per_bank = max(1, min(taps, 2048 // (P_MAX * 4)))
        for k0 in range(0, taps, per_bank):
            kn = min(per_bank, taps - k0)
            ps = nl.ndarray((P_MAX, kn, CO_MAX), dtype=self.w.dtype, buffer=nl.psum,
                            name="conv_wT")
            for k in range(kn):
                nisa.nc_transpose(dst=ps[0:cn, k, 0:con], data=rows[0:con, :, k0 + k],
                                  engine=nisa.engine.tensor)
            dst = t[0:cn, ti, :, k0 : k0 + kn]
            scalar_copy(dst, ps[0:cn, :, 0:con].permute((0, 2, 1)))
            del ps

    def _load_depthwise(self, t, ob: OutBlock) -> None:
        """One input channel per group: load V densely (channel p, its vco_g outputs x taps)
        and spread it on the block diagonal with one affine_select (keep where the output's
        group is the partition's)."""
        cn, m = ob.ng, self.vco_g
        dense = nl.ndarray((P_MAX, 1, m, self.taps), dtype=self.w.dtype, buffer=nl.sbuf,
                           name="conv_wd")
        src = self.w.ap([[self.gs, cn], [self.js, m], [self.s2, self.kh], [self.s3, self.kw]],
                        offset=int(self.w.offset) + ob.g0 * self.gs)
        nisa.dma_copy(dst=dense[0:cn, 0], src=src)
        nisa.affine_select(dst=t[0:cn, 0], pattern=[[-1, cn], [0, m * self.taps]],
                           channel_multiplier=1, on_true_tile=dense[0:cn].broadcast(1, cn),
                           on_false_value=0.0, cmp_op=nl.equal, offset=0)
