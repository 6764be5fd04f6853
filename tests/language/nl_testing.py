"""run_tile: run a tile function on loaded inputs and fetch the result (nki.language tests)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np


def run_tile(fn: Callable[..., Any], *arrays: np.ndarray, chip: str = "trn3") -> np.ndarray:
    """Load every array into SBUF, apply fn, return its result (PSUM results copied out) as
    float32 (or the result's integer dtype)."""

    def kernel(*inputs):
        tiles = [nl.load(t) for t in inputs]
        r = fn(*tiles)
        if r.buffer == nl.psum:
            staged = nl.ndarray(r.shape, r.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=staged, src=r)
            r = staged
        out = nl.ndarray(r.shape, r.dtype, buffer=nl.shared_hbm)
        nl.store(out, r)
        return out

    return nki.simulate(kernel, chip=chip)(*arrays)
