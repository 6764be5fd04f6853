"""Helpers for the kernel-library tests: inputs, tolerances and error-location checks."""

from __future__ import annotations

import ml_dtypes
import nki
import numpy as np
import pytest
from source_paths import assert_no_internal_path

from trnsim.errors import ConstraintError
from trnsim.nki.runner import run_kernel

BF16 = ml_dtypes.bfloat16
# Tolerances relative to max |reference| for results rounded once to the output dtype (plus
# fp32 accumulation): bf16 keeps 8 significant bits, fp16 11, fp32 24.
RTOL = {"bfloat16": 2**-7, "float16": 2**-10, "float32": 1e-5}


def randn(rng: np.random.Generator, shape: tuple[int, ...], dtype, scale: float = 1.0):
    return (scale * rng.standard_normal(shape)).astype(dtype)


def assert_close(got, want, dtype_name: str, factor: float = 1.0, abs_frac: float = 1 / 64) -> None:
    """|got - want| <= factor * RTOL[dtype] * (|want| + abs_frac * max|want|), elementwise.

    abs_frac = 1 suits sums with cancellation (attention, MoE), where the error scales with
    the terms rather than with the result."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape
    tol = factor * RTOL[dtype_name]
    scale = float(np.max(np.abs(want))) or 1.0
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale * abs_frac)


def program_of(kernel, *args, chip: str = "trn3", **kwargs):
    """The instruction record of one launch (no timing)."""
    return run_kernel(kernel, args, kwargs, chip=chip).program


def assert_rejected(match: str, kernel, *args, chip: str = "trn3", **kwargs) -> None:
    """The launch raises ConstraintError(match), located at this helper's call of the kernel
    (the kernel's caller), with no simulator-internal path in the message."""
    with pytest.raises(ConstraintError, match=match) as exc:
        nki.simulate(kernel, chip=chip)(*args, **kwargs)  # the expected location
    loc = exc.value.loc
    assert loc is not None
    assert loc.filename == __file__
    assert "nki.simulate(kernel, chip=chip)" in loc.code
    assert_no_internal_path(str(exc.value))


class Strided:
    """A kernel argument that reaches the kernel as a strided HBM view of `base` (shape,
    element strides, element offset): how the PyTorch device hands over non-contiguous,
    offset and broadcast (stride-0) tensors. For `run_views`."""

    def __init__(self, base: np.ndarray, shape, strides, offset: int = 0):
        self.base = np.ascontiguousarray(base).reshape(-1)
        self.shape, self.strides, self.offset = tuple(shape), tuple(strides), int(offset)

    def expected(self) -> np.ndarray:
        """The view's elements as numpy sees them (a copy)."""
        isz = self.base.dtype.itemsize
        return np.lib.stride_tricks.as_strided(
            self.base[self.offset:], self.shape, tuple(s * isz for s in self.strides)).copy()


def run_views(kernel, *args, chip: str = "trn3", **attrs):
    """Launch destination-passing `kernel(*args, **attrs)` where any argument may be a
    `Strided`; returns the bases (numpy arrays) after the launch, one per argument, with the
    kernel's writes (plain arrays are returned as updated in place)."""
    bases = [a.base if isinstance(a, Strided) else a for a in args]

    def wrapper(*hbm):
        views = []
        for a, t in zip(args, hbm, strict=True):
            if isinstance(a, Strided):
                pattern = [[s, n] for s, n in zip(a.strides, a.shape, strict=True)]
                t = t.ap(pattern, offset=a.offset)
            views.append(t)
        kernel(*views, **attrs)

    nki.simulate(wrapper, chip=chip)(*bases)
    return bases
