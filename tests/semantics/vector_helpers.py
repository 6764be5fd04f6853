"""Kernel-side helpers for the Vector-family semantics tests: move host arrays in and out of
SBUF/PSUM, resolve op constants, run a kernel, convert floats to ints as the hardware does."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

BF16 = ml_dtypes.bfloat16


def op(name: str) -> Any:
    """The nl.* op constant, as GA kernels pass it."""
    return getattr(nl, name)


def load(a: Any, space: str = "sbuf") -> Any:
    """HBM kernel argument -> a fresh SBUF (or PSUM, via a Vector tensor_copy) tile."""
    t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    if space == "psum":
        p = nl.ndarray(a.shape, a.dtype, buffer=nl.psum)
        nisa.tensor_copy(dst=p, src=t, engine=nisa.engine.vector)
        return p
    return t


def tile(shape: tuple[int, ...], dtype: Any, space: str = "sbuf") -> Any:
    return nl.ndarray(shape, dtype, buffer=nl.psum if space == "psum" else nl.sbuf)


def store(t: Any) -> Any:
    """An on-chip tile -> a new shared-HBM output (PSUM goes through SBUF first)."""
    if t.buffer.space == "psum":
        s = nl.ndarray(t.shape, t.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=s, src=t, engine=nisa.engine.vector)
        t = s
    out = nl.ndarray(t.shape, t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def run(kernel: Any, *args: Any, chip: str | None = None, **kw: Any) -> Any:
    opts = {"chip": chip} if chip else {}
    return nki.simulate(kernel, **opts, **kw)(*args)


def rne_int(x: Any, dtype: Any) -> np.ndarray:
    """float -> int as the hardware converts: round half to even, saturate, NaN -> 0."""
    info = np.iinfo(dtype)
    r = np.rint(np.asarray(x, dtype=np.float64))
    r = np.nan_to_num(r, nan=0.0)
    return np.clip(r, info.min, info.max).astype(dtype)
