"""nki.isa wrappers for DMA instructions: NKI's GA signatures, then one `_issue` call.

Views with runtime addresses are recorded with `<operand>_dynamic` attributes (scalar or
vector), so a timing-only run (values=False, offsets taken as 0) still shows them.
"""

from __future__ import annotations

from typing import Any

from trnsim.errors import ConstraintError
from trnsim.nki._isa_base import _engine_name, _issue, dge_mode, engine, oob_mode
from trnsim.program import capture_location

__all__ = ["dma_compute", "dma_copy", "dma_transpose"]

MAX_COMPUTE_SOURCES = 16


def _dynamic_attrs(**views: Any) -> dict[str, str]:
    out = {}
    for k, v in views.items():
        dyn = getattr(v, "dynamic", None)
        if dyn is not None:
            out[f"{k}_dynamic"] = dyn.kind
    return out


def dma_copy(
    dst: Any,
    src: Any,
    oob_mode: oob_mode = oob_mode.error,
    dge_mode: dge_mode = dge_mode.unknown,
    engine: engine = engine.unknown,
    name: str | None = None,
    priority: int | None = None,
) -> Any:
    """Copy src to dst through the DMA engines (HBM<->SBUF, HBM<->HBM, SBUF<->SBUF)."""
    return _issue(
        "dma_copy",
        None,
        name=name,
        dst=dst,
        src=src,
        oob_mode=oob_mode,
        dge_mode=dge_mode,
        queue_engine=_engine_name(engine),
        priority=priority,
        **_dynamic_attrs(dst=dst, src=src),
    )


def dma_transpose(
    dst: Any,
    src: Any,
    axes: Any = None,
    priority: int | None = None,
    dge_mode: dge_mode = dge_mode.unknown,
    oob_mode: oob_mode = oob_mode.error,
    name: str | None = None,
) -> Any:
    """dst (SBUF) = src transposed while moving: axes (1, 0), (2, 1, 0) or (3, 1, 2, 0)."""
    return _issue(
        "dma_transpose",
        None,
        name=name,
        dst=dst,
        src=src,
        axes=None if axes is None else tuple(axes),
        priority=priority,
        dge_mode=dge_mode,
        oob_mode=oob_mode,
        **_dynamic_attrs(dst=dst, src=src),
    )


def dma_compute(
    dst: Any,
    srcs: Any,
    reduce_op: Any,
    scales: Any = None,
    unique_indices: bool = True,
    name: str | None = None,
    oob_mode: oob_mode = oob_mode.error,
) -> Any:
    """dst = reduce_op over srcs[i] * scales[i], computed in fp32 by the DMA engines."""
    srcs = list(srcs) if isinstance(srcs, (list, tuple)) else [srcs]
    if len(srcs) > MAX_COMPUTE_SOURCES:
        raise ConstraintError(
            f"dma_compute: {len(srcs)} sources; at most {MAX_COMPUTE_SOURCES}", capture_location()
        )
    operands = {f"src{i}": s for i, s in enumerate(srcs)}
    return _issue(
        "dma_compute",
        None,
        name=name,
        dst=dst,
        reduce_op=reduce_op,
        scales=None if scales is None else tuple(scales),
        unique_indices=unique_indices,
        oob_mode=oob_mode,
        **operands,
        **_dynamic_attrs(dst=dst, **operands),
    )
