"""nki.isa wrappers for tensor instructions: NKI's signature and docstring, then one `_issue` call.

quantize_mx runs on the Vector Engine but lives here, next to nc_matmul_mx whose operands it
produces (semantics in trnsim/semantics/mx.py).
"""

from __future__ import annotations

from typing import Any

from trnsim.nki._isa_base import _issue, engine, matmul_perf_mode


def nc_matmul(
    dst: Any,
    stationary: Any,
    moving: Any,
    is_stationary_onezero: bool = False,
    is_moving_onezero: bool = False,
    is_transpose: bool = False,
    accumulate: bool | None = None,
    tile_position: Any = (),
    tile_size: Any = (),
    perf_mode: Any = matmul_perf_mode.none,
    name: str | None = None,
) -> Any:
    """dst (PSUM) = stationary.T @ moving on the Tensor Engine, accumulating in fp32."""
    return _issue(
        "nc_matmul",
        engine.tensor,
        name=name,
        dst=dst,
        stationary=stationary,
        moving=moving,
        is_stationary_onezero=is_stationary_onezero,
        is_moving_onezero=is_moving_onezero,
        is_transpose=is_transpose,
        accumulate=accumulate,
        tile_position=tuple(tile_position or ()),
        tile_size=tuple(tile_size or ()),
        perf_mode=_perf_value(perf_mode),
    )


def _perf_value(mode: Any) -> Any:
    """A matmul_perf_mode member's value (its ._value_: .value is a Python-level property)."""
    return mode._value_ if type(mode) is matmul_perf_mode else getattr(mode, "value", mode)


def nc_matmul_mx(
    dst: Any,
    stationary: Any,
    moving: Any,
    stationary_scale: Any,
    moving_scale: Any,
    tile_position: Any = None,
    tile_size: Any = None,
    accumulate: bool | None = None,
    name: str | None = None,
) -> Any:
    """dst (PSUM) = MXFP8/MXFP4 stationary.T @ moving with E8M0 dequantisation (NC-v4)."""
    return _issue(
        "nc_matmul_mx",
        engine.tensor,
        name=name,
        dst=dst,
        stationary=stationary,
        moving=moving,
        stationary_scale=stationary_scale,
        moving_scale=moving_scale,
        tile_position=tuple(tile_position or ()),
        tile_size=tuple(tile_size or ()),
        accumulate=accumulate,
    )


def nc_transpose(
    dst: Any, data: Any, engine: engine = engine.unknown, name: str | None = None
) -> Any:
    """2-D partition<->free transpose on the Tensor (<=128x128) or Vector (<=32x32) Engine."""
    return _issue("nc_transpose", engine, name=name, dst=dst, data=data)


def quantize_mx(dst: Any, src: Any, dst_scale: Any, name: str | None = None) -> Any:
    """Quantize bf16/fp16 src to MXFP8 x4 data and E8M0 scales (Vector Engine, NC-v4)."""
    return _issue("quantize_mx", engine.vector, name=name, dst=dst, src=src, dst_scale=dst_scale)
