"""Arguments of the device kernels: tensors that may be int64 pair views, and axis numbers.

Layer: kernel library (trnsim.kernels). The backend passes an int64 tensor as an int32 pair
view [..., 2] (docs/device-kernels.md) and names such arguments in the kernel's `int64=`
keyword; `Tensor` gives a kernel the logical view (the low words) and the full pair view.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._common import fail

DTYPES = ("float32", "bfloat16", "float16", "int32", "int16", "int8", "uint8", "bool")
FLOATS = ("float32", "bfloat16", "float16")


class Tensor:
    """A kernel argument: its logical view (an int64 pair view's low words) and whether it is
    an int64 pair view (docs/device-kernels.md)."""

    def __init__(self, what: str, name: str, view: Any, int64: Any):
        self.full = view
        self.pair = name in tuple(int64)
        if self.pair and (str(view.dtype) != "int32" or view.shape[-1] != 2):
            fail(
                f"{what}: {name} is named in int64= but is not an int32 pair view [..., 2] "
                f"(shape {list(view.shape)}, dtype {view.dtype})"
            )
        self.view = view.select(len(view.shape) - 1, 0) if self.pair else view
        self.shape = tuple(int(s) for s in self.view.shape)
        self.dtype = "int64" if self.pair else str(view.dtype)
        if not self.pair and self.dtype not in DTYPES:
            fail(f"{what}: {name} dtype {self.dtype} is not one of {', '.join(DTYPES)} (or int64)")

    @property
    def is_float(self) -> bool:
        return self.dtype in FLOATS


def axis(what: str, name: str, d: Any, rank: int) -> int:
    """Axis d (negative counts from the end) of a rank-`rank` tensor, checked."""
    if not isinstance(d, (int, np.integer)) or isinstance(d, bool) or not -rank <= d < rank:
        fail(f"{what}: {name}={d!r} is outside [-{rank}, {rank}) for a {rank}-d tensor")
    return int(d) % rank


def axes(what: str, dims: Any, rank: int) -> tuple[int, ...]:
    """A reduction's axes: int, sequence, or None / [] for every axis; sorted, no repeats."""
    items = (
        list(range(rank))
        if dims is None
        else ([dims] if isinstance(dims, (int, np.integer)) else list(dims))
    )
    out = [axis(what, "dims", d, rank) for d in (items or range(rank))]
    if len(set(out)) != len(out):
        fail(f"{what}: dims={dims!r} names an axis twice")
    return tuple(sorted(out))
