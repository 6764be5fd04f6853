"""Shared helpers of the Beta-1 tests: run a kernel body on tiles, compare with numpy."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np


def tile_fn(body: Callable[..., Any], *arrays: np.ndarray, out_dtype: Any = None,
            **kw: Any) -> np.ndarray:
    """Load each array into one SBUF tile, apply body(*tiles), store the result and return it."""

    def kernel(*ins: Any) -> Any:
        tiles = [nl.load(t) for t in ins]
        res = body(*tiles)
        out = nl.ndarray(res.shape, dtype=out_dtype or res.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=res)
        return out

    return nki.simulate_kernel(kernel, *arrays, **kw)
