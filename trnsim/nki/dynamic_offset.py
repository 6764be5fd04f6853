"""Runtime offsets of NkiTensor views (DynamicOffset) and the helpers that read index operands:
index tensors and registers, read when an instruction executes. Used by the DynamicAccess
mixin (tensor_dynamic) and NkiTensor (tensor).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from trnsim import dtypes as dt
from trnsim.errors import ConstraintError, KernelError
from trnsim.memory import View
from trnsim.nki.views import DynSlice
from trnsim.program import capture_location
from trnsim.spec import show_value

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class DynamicOffset:
    """The runtime part of a view's address: `NkiTensor.dynamic` (None for static views).

    The view's static Layout gives every element's storage position with each runtime
    index taken as 0. The DynamicOffset adds, when an instruction executes, a term that
    depends on values in memory (or in a register) at that moment (nki-api.md §4.2, §4.3):

    kind "scalar"  from `.ap(scalar_offset=s, indirect_dim=k)` or `.select(dim, s)` with s a
        tensor/register:  position(i) = static_position(i) + value(s) * multiplier.
        `s` is a 1x1 SBUF/PSUM tensor (its one element) or a register; `dim` is None.
    kind "vector"  from `.ap(vector_offset=v)` or `.vector_select(0, v)` (HBM only):
        position(i) = static_position(i) + v[i[dim]] * multiplier; the static stride of
        `dim` is 0, so view row w reads base row v[w]. `v` is a (P, 1) SBUF index tensor.
    kind "indirect"  from `.indirect(index, num_elem)` (NC-v4 tensor indirection on compute
        ops, on chip): view shape (P, num_elem); column i of every partition reads base free
        element index[i % G, i // G] * multiplier, G = 16 (Vector/Scalar/GpSimd) or 32
        (Tensor Engine; pass group=32 to `offsets`).

    multiplier: storage elements per index unit (the stride of the indexed base dim).
    bound: index values outside [0, bound) are out of bounds: an OutOfBoundsError, or under
        dma_copy(oob_mode=skip) the affected rows are skipped (`NkiTensor.element_positions`
        reports them in its `valid` mask).

    Consumers rarely need this class directly: NkiTensor.read()/write()/write_raw()/
    read_f32() gather and scatter through it, region() widens to the whole buffer (any
    element may be touched), and element_positions() gives positions plus the valid mask.
    """

    kind: str
    index: Any
    multiplier: int
    dim: int | None = None
    bound: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("scalar", "vector", "indirect"):
            raise ValueError(f"DynamicOffset.kind {self.kind!r}")

    def offsets(self, group: int = 16) -> np.ndarray:
        """Index values in use order: one value (scalar), one per row (vector) or column."""
        vals = index_values(self.index)
        if self.kind == "scalar":
            return vals.reshape(-1)[:1]
        if self.kind == "vector":
            return vals.reshape(-1)
        rows = vals.reshape(vals.shape[0], -1)
        g = min(group, rows.shape[0])
        n = rows.size
        i = np.arange(n)
        return rows[i % g, i // g]

    def moved(self, dim: int | None) -> DynamicOffset:
        return DynamicOffset(self.kind, self.index, self.multiplier, dim, self.bound)


def index_values(index: Any) -> np.ndarray:
    """Current integer values of an index operand: a tensor (read now) or a register.

    A register is any object with an int `value` attribute, or convertible with int().
    """
    if isinstance(index, View):
        return np.asarray(
            dt.to_float32(index.read()) if index.dtype.kind == "float" else index.read()
        ).astype(np.int64)
    v = getattr(index, "value", None)
    if v is not None and not callable(v):
        return np.asarray([int(v)], dtype=np.int64)
    return np.asarray([int(index)], dtype=np.int64)


def user_errors(fn: F) -> F:
    """Attach the user's source line to KernelErrors raised by a view method."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except KernelError as e:
            raise e.with_loc(capture_location()) from None

    return wrapper  # type: ignore[return-value]


def axis_shape(ndim: int, k: int, n: int) -> tuple[int, ...]:
    return tuple(n if i == k else 1 for i in range(ndim))


def is_register(x: Any) -> bool:
    """A runtime scalar (nisa register / NkiScalar): not a Python int, has a current value."""
    return not isinstance(x, (int, np.integer, slice, DynSlice, View)) and hasattr(type(x), "value")


def is_index_tensor(x: Any) -> bool:
    return isinstance(x, View)


def check_index_tensor(t: Any, op: str, scalar: bool) -> None:
    if not isinstance(t, View):
        raise ConstraintError(f"{op}: the index must be a tensor, got {show_value(t)}")
    if not t.buffer.on_chip:
        raise ConstraintError(
            f"{op}: the index tensor must be in SBUF or PSUM, got {t.buffer.space}"
        )
    if scalar and t.size != 1:
        raise ConstraintError(
            f"{op}: a dynamic scalar index must be a 1x1 tensor, got shape {list(t.shape)}"
        )
    if not scalar and (len(t.shape) < 1 or t.size != t.shape[0]):
        raise ConstraintError(f"{op}: a vector offset must have shape (P, 1), got {list(t.shape)}")


def as_dtype(x: Any) -> dt.DType:
    try:
        return dt.resolve(x)
    except (TypeError, KeyError, ValueError) as e:
        raise ConstraintError(f"unknown dtype {x!r} (known: {', '.join(dt.ALL)})") from e
