"""Semantics of DMA instructions. Pure numpy; knows nothing about time."""

from __future__ import annotations

import numpy as np

from trnsim import dtypes as dt
from trnsim.errors import ConstraintError
from trnsim.memory import View
from trnsim.semantics import semantics


def _same_count(instr: str, dst: View, src: View) -> None:
    if dst.size != src.size:
        raise ConstraintError(f"{instr}: dst has {dst.size} elements {list(dst.shape)} but src has "
                              f"{src.size} {list(src.shape)}; element counts must match")


@semantics("dma_copy")
def dma_copy(core, *, engine: str, dst: View, src: View, **attrs) -> None:
    """dst = src element by element in row-major order; different dtypes cast via fp32."""
    _same_count("dma_copy", dst, src)
    vals = src.read()
    if src.dtype == dst.dtype:
        dst.write_raw(vals.reshape(dst.shape))
    else:
        dst.write(dt.to_float32(vals).reshape(dst.shape) if dst.dtype.kind == "float"
                  else np.asarray(vals, dtype=np.float64).reshape(dst.shape))
