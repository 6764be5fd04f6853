"""NkiTensor: the user's handle on a tensor in HBM, SBUF or PSUM, with NKI's view methods.

Views never copy: each one is a new Layout (offset, shape, strides in elements) on one Buffer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trnsim import dtypes as dt
from trnsim.errors import ConstraintError, OutOfBoundsError
from trnsim.memory import Layout, View, check_bounds
from trnsim.program import capture_location


@dataclass(frozen=True)
class DynSlice:
    """nl.ds(start, size): `size` elements from `start` (start may be a loop index)."""

    start: int
    size: int
    step: int = 1


def _index_value(i: Any) -> int:
    try:
        return int(i)
    except TypeError as e:
        raise ConstraintError(f"index {i!r} is not an integer") from e


class NkiTensor(View):
    """A tensor view. Attributes as NKI: shape, dtype, strides, offset, buffer, ndim, name."""

    __slots__ = ()

    # ---------------------------------------------------------------- helpers
    def _derive(self, layout: Layout, what: str = "view") -> NkiTensor:
        try:
            check_bounds(self.buffer, layout, what)
        except OutOfBoundsError as e:
            raise e.with_loc(capture_location()) from None
        return type(self)(self.buffer, layout)

    @property
    def on_chip(self) -> bool:
        return self.buffer.on_chip

    @property
    def memory_kind(self) -> str:
        return self.buffer.kind

    def __repr__(self) -> str:
        return (f"NkiTensor({self.buffer.name or '?'}: {self.dtype}@{self.buffer.space}"
                f"{list(self.shape)})")

    def __len__(self) -> int:
        return self.shape[0] if self.shape else 1

    def __bool__(self) -> bool:
        raise ConstraintError("cannot evaluate the truth value of a tensor "
                              "(control flow cannot depend on tensor values)")

    # ---------------------------------------------------------------- indexing
    def __getitem__(self, key: Any) -> NkiTensor:
        return self._derive(index_layout(self.layout, key, self.on_chip, self.name), "index")

    def reshape(self, shape: Any, *more: int) -> NkiTensor:
        shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape, *more)
        return self._derive(reshape_layout(self.layout, shape, self.on_chip, self.name), "reshape")


def _normalize_key(key: Any, ndim: int) -> list[Any]:
    key = list(key) if isinstance(key, tuple) else [key]
    n_ell = sum(1 for k in key if k is Ellipsis)
    if n_ell > 1:
        raise ConstraintError("an index can have only one '...'")
    if n_ell:
        i = key.index(Ellipsis)
        fill = ndim - (len(key) - 1)
        key = key[:i] + [slice(None)] * fill + key[i + 1:]
    if len(key) > ndim:
        raise ConstraintError(f"too many indices ({len(key)}) for a {ndim}-D tensor")
    return key + [slice(None)] * (ndim - len(key))


def index_layout(lay: Layout, key: Any, on_chip: bool, name: str = "") -> Layout:
    """Basic indexing (ints, slices with step, ..., nl.ds) of a layout, NKI rules for ints."""
    key = _normalize_key(key, len(lay.shape))
    offset = lay.offset
    shape: list[int] = []
    strides: list[int] = []
    int_dims: list[int] = []
    for d, (k, n, s) in enumerate(zip(key, lay.shape, lay.strides, strict=True)):
        if isinstance(k, DynSlice):
            start, size, step = _index_value(k.start), _index_value(k.size), k.step
            if start < 0 or start + (size - 1) * step >= n or size < 0:
                raise OutOfBoundsError(
                    f"tensor '{name}' dimension {d}: index range [{start}, "
                    f"{start + (size - 1) * step}] exceeds dimension size {n}")
            offset += start * s
            shape.append(size)
            strides.append(s * step)
        elif isinstance(k, slice):
            start, stop, step = k.indices(n)
            if k.start is not None and not -n <= _index_value(k.start) <= n:
                raise OutOfBoundsError(f"tensor '{name}' dimension {d}: slice start {k.start} "
                                       f"is outside a dimension of size {n}")
            if k.stop is not None and _index_value(k.stop) > n:
                raise OutOfBoundsError(f"tensor '{name}' dimension {d}: slice stop {k.stop} "
                                       f"exceeds dimension size {n}")
            count = len(range(start, stop, step))
            offset += start * s if count else 0
            shape.append(count)
            strides.append(s * step)
        else:
            i = _index_value(k)
            if i < 0:
                i += n
            if not 0 <= i < n:
                raise OutOfBoundsError(f"tensor '{name}' dimension {d}: index {k} is out of "
                                       f"range for size {n}")
            offset += i * s
            int_dims.append(len(shape))
            shape.append(1)
            strides.append(s)
    # On chip: an int on dim 0 keeps a size-1 partition dim; ints on free dims drop them
    # unless the result would fall below 2-D. In HBM ints drop dims (result at least 1-D).
    drop = [d for d in int_dims if not (on_chip and d == 0)]
    keep_min = 2 if on_chip else 1
    while drop and len(shape) - len(drop) < keep_min:
        drop.pop()  # keep the last int dims as size 1
    shape_out = [n for d, n in enumerate(shape) if d not in drop]
    strides_out = [s for d, s in enumerate(strides) if d not in drop]
    return Layout(lay.dtype, offset, tuple(shape_out), tuple(strides_out))


def reshape_layout(lay: Layout, shape: tuple[int, ...], on_chip: bool, name: str = "") -> Layout:
    """Reshape a contiguous run of dims (row-major); the partition dim stays on chip."""
    shape = tuple(int(s) for s in shape)
    if shape.count(-1) > 1:
        raise ConstraintError(f"reshape of '{name}': at most one -1 allowed, got {shape}")
    total = lay.size
    if -1 in shape:
        rest = 1
        for s in shape:
            if s != -1:
                rest *= s
        shape = tuple(total // rest if s == -1 else s for s in shape)
    new_total = 1
    for s in shape:
        new_total *= s
    if new_total != total:
        raise ConstraintError(f"reshape of '{name}': cannot reshape {list(lay.shape)} "
                              f"({total} elements) into {list(shape)} ({new_total} elements)")
    if on_chip and (not shape or shape[0] != lay.shape[0]):
        raise ConstraintError(f"reshape of '{name}': the partition dimension must stay "
                              f"{lay.shape[0]} on chip, got {list(shape)}")
    if on_chip:
        head = Layout(lay.dtype, lay.offset, lay.shape[1:], lay.strides[1:])
        sub = _reshape_free(head, shape[1:], name)
        return Layout(lay.dtype, lay.offset, shape, (lay.strides[0], *sub))
    return Layout(lay.dtype, lay.offset, shape, _reshape_free(lay, shape, name))


def _reshape_free(lay: Layout, shape: tuple[int, ...], name: str) -> tuple[int, ...]:
    dims = [(n, s) for n, s in zip(lay.shape, lay.strides, strict=True) if n != 1]
    # Contiguous (row-major over the dims that matter) is required for a view reshape.
    for (n0, s0), (_, s1) in zip(dims, dims[1:], strict=False):
        if s0 != n0 * s1 and not (n0 == 1):
            pass
    ok = all(dims[i][1] == dims[i + 1][0] * dims[i + 1][1] for i in range(len(dims) - 1))
    if not ok:
        raise ConstraintError(f"reshape of '{name}': the view is not contiguous "
                              f"(shape {list(lay.shape)}, strides {list(lay.strides)}); "
                              "reshape needs a row-major contiguous layout")
    inner = dims[-1][1] if dims else 1
    out = []
    acc = inner
    for s in reversed(shape):
        out.append(acc)
        acc *= s
    return tuple(reversed(out))


def as_dtype(x: Any) -> dt.DType:
    try:
        return dt.resolve(x)
    except (TypeError, KeyError, ValueError) as e:
        raise ConstraintError(f"unknown dtype {x!r} (known: {', '.join(dt.ALL)})") from e
