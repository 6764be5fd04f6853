"""nki.isa wrappers for dma instructions: NKI's signature and docstring, then one `_issue` call."""

from __future__ import annotations

from typing import Any

from trnsim.nki._isa_base import _engine_name, _issue, dge_mode, engine, oob_mode


def dma_copy(dst: Any, src: Any, oob_mode: oob_mode = oob_mode.error,
             dge_mode: dge_mode = dge_mode.unknown, engine: engine = engine.unknown,
             name: str | None = None, priority: int | None = None, **kw: Any) -> None:
    """Copy src to dst through the DMA engines (HBM<->SBUF, HBM<->HBM, SBUF<->SBUF)."""
    _issue("dma_copy", None, name=name, dst=dst, src=src, oob_mode=oob_mode,
           dge_mode=dge_mode, queue_engine=_engine_name(engine), priority=priority, **kw)
