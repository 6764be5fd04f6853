"""The PSUM evacuation of the matmul-family device kernels: out = alpha * acc + beta * c, cast.

Layer: kernel library; public NKI API only. The addend `c` is a strided HBM matrix (Mat) whose
strides say its kind: constant along columns (a column [M, 1] broadcast, or N = 1) becomes a
per-partition bias that ScalarE and VectorE both fuse into the copy; constant along rows (a
bias [N] broadcast over M) is loaded once per column block for all 128 partitions; anything
else is loaded per output tile. Row and full addends use scalar_tensor_tensor (VectorE).
"""

from __future__ import annotations

from typing import Any

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

from ._common import scalar_copy
from ._kmajor import P_MAX, Mat, load_kmajor

KINDS = ("scale", "column", "row", "full")


def epilogue_kind(c: Mat | None, beta: float) -> str:
    """'scale' (no addend), 'column', 'row' or 'full' for the addend c (see module docstring)."""
    if c is None or beta == 0:
        return "scale"
    if c.cols == 1 or c.cs == 0:
        return "column"
    if c.rows == 1 or c.rs == 0:
        return "row"
    return "full"


class Epilogue:
    """dst = cast(alpha * acc + beta * c) for one kind of addend."""

    def __init__(self, kind: str, alpha: float, beta: float):
        self.kind, self.alpha, self.beta = kind, alpha, beta

    # ------------------------------------------------------------ addend tiles
    def load_block(self, c: Mat | None, cache: dict, m0: int, mw: int, n0: int, nw: int) -> Any:
        """The addend tile(s) a block of output rows m0..m0+mw, columns n0..n0+nw needs:
        column: [128, ceil(mw/128), 1] fp32 (beta * c, row tile t on column t); row: [128, nw]
        fp32 (beta * c, the same on every partition); full: [mw <= 128, nw] (beta * c).
        Consecutive blocks with the same addend reuse the cached tile."""
        if self.kind == "scale":
            return None
        if self.kind == "column":
            key = ("column", c.off, m0)
            hit = cache.get("c")
            if hit is not None and hit[0] == key:
                return hit[1]
            t = nl.ndarray((P_MAX, -(-mw // P_MAX), 1), dtype=nl.float32, buffer=nl.sbuf,
                           name="gemm_ccol")
            load_kmajor(t, c, m0, mw, 0, 1, "direct")  # DMA casts to fp32
            full, rem = divmod(mw, P_MAX)
            if full:
                self._scale(t[:, 0:full, :])
            if rem:
                self._scale(t[0:rem, full, :])
            cache["c"] = (key, t)
            return t
        if self.kind == "row":
            key = ("row", c.off, n0)
            hit = cache.get("c")
            if hit is not None and hit[0] == key:
                return hit[1]
            t = nl.ndarray((P_MAX, nw), dtype=nl.float32, buffer=nl.sbuf, name="gemm_crow")
            # Partition stride 0: every partition reads the same contiguous run of the row.
            nisa.dma_copy(dst=t, src=c.pattern([[0, P_MAX], [c.cs, nw]], 0, n0))
            self._scale(t)
            cache["c"] = (key, t)
            return t
        t = nl.ndarray((P_MAX, nw), dtype=nl.float32, buffer=nl.sbuf, name="gemm_cfull")
        nisa.dma_copy(dst=t[0:mw, :], src=c.block(m0, mw, n0, nw))
        self._scale(t[0:mw, :])
        return t

    def _scale(self, t) -> None:
        """t *= beta on ScalarE (row and full addends leave it idle), unless beta is 1."""
        if self.beta != 1.0:
            nisa.activation(dst=t, op=nl.copy, data=t, scale=self.beta)

    def tile_for(self, c, tiles, mt: int, mm: int, c_col: int, gw: int):
        """The addend operand of one [mm, gw] output tile group: rows tile mt of the block,
        columns c_col..c_col+gw of the block ([mm, 1] for a column addend)."""
        if self.kind == "scale":
            return None
        if self.kind == "column":
            return tiles[0:mm, mt, :]
        return tiles[0:mm, c_col : c_col + gw]

    # ------------------------------------------------------------ evacuation
    def store(self, out: Mat, res, mm: int, r0: int, col: int, gw: int) -> None:
        """The evacuated tile res[:mm, :gw] to out rows r0.., columns col.. (one DMA)."""
        nisa.dma_copy(dst=out.block(r0, mm, col, gw), src=res[0:mm, 0:gw])

    def apply(self, dst, acc, engine, ctile) -> None:
        """dst = cast(alpha * acc + ctile) on `engine` (VectorE or ScalarE; row and full
        addends always on VectorE)."""
        a = self.alpha
        scalar = engine == nisa.engine.scalar
        if self.kind == "scale":
            if a == 1.0:
                if scalar:
                    scalar_copy(dst, acc)
                else:
                    nisa.tensor_copy(dst=dst, src=acc, engine=engine)
            elif scalar:
                nisa.activation(dst=dst, op=nl.copy, data=acc, scale=a)
            else:
                nisa.tensor_scalar(dst=dst, data=acc, op0=nl.multiply, operand0=a,
                                   engine=engine)
        elif self.kind == "column":
            if scalar:
                nisa.activation(dst=dst, op=nl.copy, data=acc, scale=a, bias=ctile)
            else:
                nisa.tensor_scalar(dst=dst, data=acc, op0=nl.multiply, operand0=a,
                                   op1=nl.add, operand1=ctile, engine=engine)
        else:
            nisa.scalar_tensor_tensor(dst=dst, data=acc, op0=nl.multiply, operand0=a,
                                      op1=nl.add, operand1=ctile)
