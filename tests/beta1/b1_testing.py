"""Helpers of the Beta-1 tests: run a tile body on loaded inputs, and check error locations."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np
from source_paths import assert_no_internal_path


def tile_fn(
    body: Callable[..., Any], *arrays: np.ndarray, out_dtype: Any = None, **options: Any
) -> np.ndarray:
    """Load each array into one SBUF tile, apply body(*tiles), store the result, return it
    (a PSUM result is stored through the implicit copy of nl.store)."""

    def kernel(*inputs: Any) -> Any:
        tiles = [nl.load(t) for t in inputs]
        res = body(*tiles)
        out = nl.ndarray(res.shape, dtype=out_dtype or res.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=res)
        return out

    return nki.jit(kernel, **options)(*arrays)


def line_of(fn: Callable[..., Any], text: str) -> int:
    """The source line number of the first line of fn containing `text`."""
    lines, start = inspect.getsourcelines(fn)
    for k, line in enumerate(lines):
        if text in line:
            return start + k
    raise AssertionError(f"{text!r} not in {fn.__name__}")


def check_located(exc: Any, fn: Callable[..., Any], text: str) -> None:
    """The error points at the kernel's own line and shows no simulator path."""
    assert exc.value.loc is not None, str(exc.value)
    assert exc.value.loc.lineno == line_of(fn, text), (exc.value.loc, str(exc.value))
    assert_no_internal_path(str(exc.value))
