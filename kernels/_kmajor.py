"""Strided HBM matrices, and loading them into SBUF with the contraction axis on partitions.

Helpers of the device matmul-family kernels (gemm, conv, flash attention). Layer: kernel
library; public NKI API only. A `Mat` is a 2-D strided window of an HBM tensor's storage (any
strides, stride 0 included), so one code path serves contiguous, transposed, sliced and
broadcast operands.

`load_kmajor` fills an SBUF tile [128, T, w] whose partition p of column t holds row
k0 + t*128 + p of a [K, W] matrix (K tile t on column t): the layout nc_matmul wants for both
operands. It picks, per operand, the cheapest way its strides allow:

* ``direct``: the W axis is contiguous in HBM (or K is not), so one dma_copy per call moves
  runs of w elements per partition;
* ``dma_transpose``: the K axis is contiguous (e.g. ``x @ w.t()``'s weight); on NeuronCore-v3+
  the DMA transposes while it moves (nki-api.md §7.5 dma_transpose, 2- and 4-byte dtypes);
* ``pe_transpose``: the same on NeuronCore-v2, which has no DMA transpose: rows are loaded
  contiguously with W on partitions and turned by TensorE transposes (nc_transpose, 128x128
  blocks into PSUM) and a copy back to SBUF.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

from .matmul import copy_out

P_MAX = 128  # partitions per tile = contraction rows per nc_matmul (pmax)
PE_BLOCK = 128  # TensorE transposes at most 128 x 128 (nc_transpose)
TRANSPOSE_COLS = 512  # transposed columns gathered in one PSUM bank before the copy back
DMA_TARGET_BYTES = 4096  # bytes per partition per load DMA: past the fixed cost (>= 2 KiB)


@dataclass(frozen=True)
class Mat:
    """A [rows, cols] strided window of the storage of HBM tensor `t` (element strides)."""

    t: Any
    rows: int
    cols: int
    rs: int
    cs: int
    off: int

    @staticmethod
    def of(t: Any) -> Mat:
        """The last two dims of a 2-D view `t` as a Mat."""
        (r, c), (rs, cs) = t.shape, t.strides
        return Mat(t, int(r), int(c), int(rs), int(cs), int(t.offset))

    @property
    def T(self) -> Mat:
        return Mat(self.t, self.cols, self.rows, self.cs, self.rs, self.off)

    def at(self, r: int, c: int) -> int:
        """Storage offset of element (r, c)."""
        return self.off + r * self.rs + c * self.cs

    def block(self, r0: int, nr: int, c0: int, nc: int) -> Any:
        """HBM view of rows r0..r0+nr, columns c0..c0+nc."""
        return self.t.ap([[self.rs, nr], [self.cs, nc]], offset=self.at(r0, c0))

    def pattern(self, pairs: list[list[int]], r0: int, c0: int) -> Any:
        """HBM view with an explicit [[step, count], ...] pattern starting at (r0, c0)."""
        return self.t.ap(pairs, offset=self.at(r0, c0))


def kmajor_mode(m: Mat) -> str:
    """How `load_kmajor` brings the [K, W] matrix `m` in (see the module docstring).

    Where the K axis is the contiguous one, NeuronCore-v3+ transposes in the DMA: on the
    model it beat TensorE transposes (plus their PSUM copies) at every shape tried, from
    matrix-vector (4096 x 4096 x 1 bf16: 107 vs 130 us) to 1024^3 (equal)."""
    if m.rows > 1 and m.cols > 1 and m.rs == 1 and m.cs != 1:
        if nisa.get_nc_version() >= nisa.nc_version.gen3:
            return "dma_transpose"
        return "pe_transpose"
    return "direct"


def load_kmajor(dst: Any, m: Mat, k0: int, nk: int, w0: int, w: int, mode: str) -> None:
    """dst[p, t, j] = m[k0 + t*128 + p, w0 + j] for the nk rows from k0 and w columns from w0.

    `dst` is an SBUF tile [128, >= ceil(nk/128), >= w]; only those rows and columns are written
    (the last K tile's partitions from nk % 128 on stay as they were)."""
    for piece in kmajor_pieces(dst, m, k0, nk, w0, w, mode):
        piece()


def kmajor_pieces(dst: Any, m: Mat, k0: int, nk: int, w0: int, w: int, mode: str) -> list:
    """`load_kmajor` as a list of thunks, one per group of K tiles in K order (each moving
    >= DMA_TARGET_BYTES per partition where K allows), so a caller can interleave the loads of
    two operands and the first matmuls wait only for the first group of each."""
    isz = m.t.dtype.itemsize
    group = max(1, -(-DMA_TARGET_BYTES // (w * isz)))
    n_kt = -(-nk // P_MAX)
    pieces = []
    for t0 in range(0, n_kt, group):
        t1 = min(n_kt, t0 + group)
        rows = min(nk, t1 * P_MAX) - t0 * P_MAX
        issue = _PIECES[mode]
        pieces.append(lambda t0=t0, rows=rows, issue=issue: issue(dst, m, k0, t0, rows, w0, w))
    return pieces


def row_tiles(m: Mat, r0: int, full: int, w0: int, w: int) -> Any:
    """HBM view [128, full, w] of rows r0 + t*128 + p (partition p, tile t), columns w0.."""
    return m.pattern([[m.rs, P_MAX], [P_MAX * m.rs, full], [m.cs, w]], r0, w0)


def store_rows(m: Mat, src: Any, r0: int, nrows: int, w0: int, w: int) -> None:
    """m[r0 + t*128 + p, w0 + j] = src[p, t, j] for nrows rows (the inverse of a direct
    load_kmajor): one DMA for the full 128-row tiles, one for the ragged rest."""
    full, rem = divmod(nrows, P_MAX)
    if full:
        nisa.dma_copy(dst=row_tiles(m, r0, full, w0, w), src=src[:, 0:full, 0:w])
    if rem:
        nisa.dma_copy(dst=m.block(r0 + full * P_MAX, rem, w0, w), src=src[0:rem, full, 0:w])


def _direct(dst: Any, m: Mat, k0: int, t0: int, nk: int, w0: int, w: int) -> None:
    """K tiles t0.. (nk rows) by dma_copy: runs of w elements when W is contiguous."""
    full, rem = divmod(nk, P_MAX)
    r0 = k0 + t0 * P_MAX
    if full:
        nisa.dma_copy(dst=dst[:, t0 : t0 + full, 0:w], src=row_tiles(m, r0, full, w0, w))
    if rem:
        nisa.dma_copy(dst=dst[0:rem, t0 + full, 0:w], src=m.block(r0 + full * P_MAX, rem, w0, w))


def _dma_transposed(dst: Any, m: Mat, k0: int, t0: int, nk: int, w0: int, w: int) -> None:
    """K tiles t0.. by dma_transpose: dst [K, T, W] from src [W, T, K] with the (2, 1, 0)
    permutation, K contiguous in HBM."""
    full, rem = divmod(nk, P_MAX)
    r0 = k0 + t0 * P_MAX
    if full:
        src = m.pattern([[m.cs, w], [P_MAX * m.rs, full], [m.rs, P_MAX]], r0, w0)
        nisa.dma_transpose(dst=dst[:, t0 : t0 + full, 0:w], src=src)
    if rem:
        src = m.pattern([[m.cs, w], [m.rs, rem]], r0 + full * P_MAX, w0)
        nisa.dma_transpose(dst=dst[0:rem, t0 + full, 0:w], src=src)


def _pe_transposed(dst: Any, m: Mat, k0: int, t0: int, nk: int, w0: int, w: int) -> None:
    """K tiles t0.. by TensorE transposes: W rows on partitions (K contiguous per partition),
    then 128 x 128 nc_transpose blocks into PSUM, copied back to SBUF by Vector/Scalar."""
    n_chunks = -(-w // PE_BLOCK)
    r0 = k0 + t0 * P_MAX
    rows = []
    for j in nl.affine_range(n_chunks):
        wc = min(PE_BLOCK, w - j * PE_BLOCK)
        r = nl.ndarray((PE_BLOCK, nk), dtype=m.t.dtype, buffer=nl.sbuf, name="pe_rows")
        nisa.dma_copy(dst=r[0:wc, :], src=m.T.block(w0 + j * PE_BLOCK, wc, r0, nk))
        rows.append(r)
    per_bank = TRANSPOSE_COLS // PE_BLOCK
    for t in nl.affine_range(-(-nk // P_MAX)):
        kk = min(P_MAX, nk - t * P_MAX)
        for g0 in range(0, n_chunks, per_bank):
            g1 = min(n_chunks, g0 + per_bank)
            gw = min(w, g1 * PE_BLOCK) - g0 * PE_BLOCK
            ps = nl.ndarray((P_MAX, gw), dtype=m.t.dtype, buffer=nl.psum, name="pe_T")
            for j in range(g0, g1):
                wc = min(PE_BLOCK, w - j * PE_BLOCK)
                c0 = (j - g0) * PE_BLOCK
                nisa.nc_transpose(
                    dst=ps[0:kk, c0 : c0 + wc],
                    data=rows[j][0:wc, t * P_MAX : t * P_MAX + kk],
                    engine=nisa.engine.tensor,
                )
            # Alternate the copy-back engine: both are idle while operands load.
            engine = nisa.engine.vector if (t + g0) % 2 == 0 else nisa.engine.scalar
            cols = slice(g0 * PE_BLOCK, g0 * PE_BLOCK + gw)
            copy_out(dst[0:kk, t0 + t, cols], ps[0:kk, 0:gw], engine)
            del ps


_PIECES = {"direct": _direct, "dma_transpose": _dma_transposed, "pe_transpose": _pe_transposed}
