"""Helpers for device-kernel tests: numpy views as the strided HBM views the PyTorch device
passes (kernel_testing.Strided), and reading an output view back after a launch."""

from __future__ import annotations

import nki
import numpy as np
import pytest
from kernel_testing import Strided
from source_paths import assert_no_internal_path

from trnsim.errors import ConstraintError


def strided_of(base: np.ndarray, view: np.ndarray) -> Strided:
    """`view` (a numpy view into the contiguous array `base`: slices, transposes,
    broadcast_to) as a Strided kernel argument over `base`."""
    assert base.flags.c_contiguous
    isz = base.itemsize
    off = view.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    assert off % isz == 0 and all(s % isz == 0 and s >= 0 for s in view.strides)
    return Strided(base, view.shape, [s // isz for s in view.strides], off // isz)


def read_view(base_after: np.ndarray, arg: Strided) -> np.ndarray:
    """The elements of view `arg` in `base_after` (a base returned by run_views)."""
    isz = base_after.itemsize
    flat = np.ascontiguousarray(base_after).reshape(-1)
    return np.lib.stride_tricks.as_strided(
        flat[arg.offset :], arg.shape, tuple(s * isz for s in arg.strides)
    ).copy()


class Same:
    """An argument that is the same HBM view as argument `index` (in-place use)."""

    def __init__(self, index: int):
        self.index = index


def launch(kernel, *args, chip: str = "trn3", **attrs) -> list:
    """Launch destination-passing `kernel(*args, **attrs)` as kernel_testing.run_views does
    (arguments may be Strided, Same or None); returns each argument's elements after the
    launch as the kernel sees them (None stays None, Same repeats its argument)."""
    real = [i for i, a in enumerate(args) if a is not None and not isinstance(a, Same)]
    bases = [args[i].base if isinstance(args[i], Strided) else args[i] for i in real]

    def wrapper(*hbm):
        views: list = [None] * len(args)
        for i, t in zip(real, hbm, strict=True):
            a = args[i]
            if isinstance(a, Strided):
                t = t.ap([[s, n] for s, n in zip(a.strides, a.shape, strict=True)], offset=a.offset)
            views[i] = t
        for i, a in enumerate(args):
            if isinstance(a, Same):
                views[i] = views[a.index]
        kernel(*views, **attrs)

    nki.simulate(wrapper, chip=chip)(*bases)
    out: list = [None] * len(args)
    for i, b in zip(real, bases, strict=True):
        out[i] = read_view(b, args[i]) if isinstance(args[i], Strided) else b
    for i, a in enumerate(args):
        if isinstance(a, Same):
            out[i] = out[a.index]
    return out


def transposed(rng: np.random.Generator, shape: tuple[int, ...], dtype, perm) -> tuple:
    """A random tensor of `shape` stored with its axes in order `perm` (a permuted view of a
    contiguous base): (numpy view, Strided argument)."""
    stored = tuple(shape[p] for p in perm)
    base = rng.standard_normal(stored).astype(dtype)
    view = base.transpose(np.argsort(perm))
    return view, strided_of(base, view)


def assert_rejected_views(match: str, kernel, *args, **attrs) -> None:
    """launch(kernel, *args, **attrs) raises ConstraintError(match), located at the line that
    called the kernel (launch's wrapper), with no simulator-internal path in the message."""
    with pytest.raises(ConstraintError, match=match) as exc:
        launch(kernel, *args, **attrs)
    loc = exc.value.loc
    assert loc is not None
    assert loc.filename == __file__
    assert "kernel(*views, **attrs)" in loc.code
    assert_no_internal_path(str(exc.value))
