"""Kernel-side helpers for the Vector-family semantics tests: move host arrays in and out of
SBUF/PSUM, resolve op constants, and check that an error points at the kernel's own line."""

from __future__ import annotations

import sys
from typing import Any

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from trnsim.errors import ConstraintError

BF16 = ml_dtypes.bfloat16
_MARKS: list[int] = []


def op(name: str) -> Any:
    """The nl.* op constant (GA kernels pass these); the name if the constant is missing."""
    return getattr(nl, name, name)


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


def mark() -> None:
    """Call on the line just above the instruction expected to fail."""
    _MARKS.append(sys._getframe(1).f_lineno + 1)


def expect_error(kernel: Any, *args: Any, match: str, chip: str | None = None) -> ConstraintError:
    """Run a buggy kernel: ConstraintError matching `match`, located at the marked line, with
    no simulator path in the message."""
    _MARKS.clear()
    with pytest.raises(ConstraintError, match=match) as exc:
        run(kernel, *args, chip=chip)
    assert _MARKS, "the kernel did not call mark() before the failing instruction"
    assert exc.value.loc is not None
    assert exc.value.loc.lineno == _MARKS[-1]
    assert "/trnsim/" not in str(exc.value)
    return exc.value


def f32(x: Any) -> np.ndarray:
    return np.asarray(x, dtype=np.float32)


def rne_int(x: Any, dtype: Any) -> np.ndarray:
    """float -> int as the hardware converts: round half to even, saturate, NaN -> 0."""
    info = np.iinfo(dtype)
    r = np.rint(np.asarray(x, dtype=np.float64))
    r = np.nan_to_num(r, nan=0.0)
    return np.clip(r, info.min, info.max).astype(dtype)
