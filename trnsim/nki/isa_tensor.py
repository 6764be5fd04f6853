"""nki.isa wrappers for tensor instructions: NKI's signature and docstring, then one `_issue` call."""

from __future__ import annotations

from typing import Any

from trnsim.nki._isa_base import _issue, engine, matmul_perf_mode


def nc_matmul(dst: Any, stationary: Any, moving: Any, is_stationary_onezero: bool = False,
              is_moving_onezero: bool = False, is_transpose: bool = False,
              tile_position: Any = (), tile_size: Any = (), accumulate: bool | None = None,
              perf_mode: Any = matmul_perf_mode.none, name: str | None = None) -> None:
    """dst (PSUM) = stationary.T @ moving on the Tensor Engine, accumulating in fp32."""
    _issue("nc_matmul", engine.tensor, name=name, dst=dst, stationary=stationary, moving=moving,
           is_stationary_onezero=is_stationary_onezero, is_moving_onezero=is_moving_onezero,
           is_transpose=is_transpose, tile_position=tuple(tile_position or ()),
           tile_size=tuple(tile_size or ()), accumulate=accumulate,
           perf_mode=getattr(perf_mode, "value", perf_mode))
