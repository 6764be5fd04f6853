"""Indexing Layout algebra behind NkiTensor (slices, ints, nl.ds, select; shape changes live in
trnsim.nki.view_shapes): pure functions Layout -> Layout.

A Layout is (dtype, offset, shape, strides) in elements over a buffer's storage flattened to
1-D (on chip: position p * F + f, F = elements per partition). No function here touches
memory or values; each raises ConstraintError / OutOfBoundsError (without a location: the
NkiTensor method that calls it attaches the user's line).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trnsim.errors import ConstraintError, OutOfBoundsError
from trnsim.memory import Layout, View, interned, tensor_label


@dataclass(frozen=True)
class DynSlice:
    """nl.ds(start, size): `size` elements from `start` (an int, or a register: then the
    view it indexes gets a runtime offset)."""

    start: Any
    size: int
    step: int = 1


_INDEX_HINT = (
    "index values must be integers (int, numpy integer, or a runtime register where a "
    "runtime offset is allowed)"
)


def index_value(i: Any, what: str = "index", hint: str = _INDEX_HINT) -> int:
    """A static integer index: a Python int, a numpy integer or anything with __index__.

    Floats are refused even when whole (64.0): int() would truncate 1.5 to 1 silently.
    """
    if isinstance(i, int):
        return int(i)
    to_index = getattr(type(i), "__index__", None)
    if to_index is not None and not isinstance(i, View):
        try:
            return int(to_index(i))
        except (TypeError, ValueError) as e:
            raise ConstraintError(f"{what} {i!r} is not an integer; {hint}") from e
    got = "a tensor" if isinstance(i, View) else f"{type(i).__name__} {i!r}"
    raise ConstraintError(f"{what} {got} is not an integer; {hint}")


def _dim(d: Any, ndim: int, what: str, allow_end: bool = False) -> int:
    d = index_value(d, what)
    hi = ndim + 1 if allow_end else ndim
    if d < 0:
        d += hi
    if not 0 <= d < hi:
        raise ConstraintError(f"{what} {d} is out of range for a {ndim}-D tensor")
    return d


# ---------------------------------------------------------------- indexing


def normalize_key(key: Any, ndim: int) -> list[Any]:
    key = list(key) if isinstance(key, tuple) else [key]
    n_ell = sum(1 for k in key if k is Ellipsis)
    if n_ell > 1:
        raise ConstraintError("an index can have only one '...'")
    if n_ell:
        i = key.index(Ellipsis)
        fill = ndim - (len(key) - 1)
        key = key[:i] + [slice(None)] * fill + key[i + 1 :]
    if len(key) > ndim:
        raise ConstraintError(f"too many indices ({len(key)}) for a {ndim}-D tensor")
    return key + [slice(None)] * (ndim - len(key))


def slice_dim(lay: Layout, d: int, start: int, stop: int, step: int, name: str) -> Layout:
    """Elements start, start+step, ... < stop of dim d (bounds already normalised)."""
    n = lay.shape[d]
    if step < 1:
        raise ConstraintError(
            f"{tensor_label(name)} dimension {d}: slice step {step}; step must be >= 1"
        )
    if start < 0 or stop > n or start > stop:
        raise OutOfBoundsError(
            f"{tensor_label(name)} dimension {d}: slice [{start}, {stop}) is "
            f"outside a dimension of size {n}"
        )
    count = len(range(start, stop, step))
    shape = list(lay.shape)
    strides = list(lay.strides)
    shape[d] = count
    strides[d] = lay.strides[d] * step
    off = lay.offset + (start * lay.strides[d] if count else 0)
    return Layout(lay.dtype, off, tuple(shape), tuple(strides))


def index_layout(lay: Layout, key: Any, on_chip: bool, name: str = "") -> tuple[Layout, list[int]]:
    """Basic indexing (ints, slices with step, ..., nl.ds) with NKI's rules for ints.

    Returns the layout and, for each result dim, the source dim it came from.
    """
    key = normalize_key(key, len(lay.shape))
    offset = lay.offset
    shape: list[int] = []
    strides: list[int] = []
    int_dims: list[int] = []
    for d, (k, n, s) in enumerate(zip(key, lay.shape, lay.strides, strict=True)):
        where = f"{tensor_label(name)} dimension {d}:"
        if isinstance(k, DynSlice):
            start = index_value(k.start, f"{where} nl.ds start")
            size = index_value(k.size, f"{where} nl.ds size")
            step = index_value(k.step, f"{where} nl.ds step")
            if size < 0 or start < 0 or (size and start + (size - 1) * step >= n):
                raise OutOfBoundsError(
                    f"{where} index range [{start}, "
                    f"{start + (size - 1) * step}] exceeds dimension size {n}"
                )
            offset += start * s
            shape.append(size)
            strides.append(s * step)
        elif isinstance(k, slice):
            step = 1 if k.step is None else index_value(k.step, f"{where} slice step")
            lo = None if k.start is None else index_value(k.start, f"{where} slice start")
            hi = None if k.stop is None else index_value(k.stop, f"{where} slice stop")
            if step == 0:
                raise ConstraintError(f"{where} slice step cannot be 0")
            if lo is not None and not -n <= lo <= n:
                raise OutOfBoundsError(
                    f"{where} slice start {lo} is outside a dimension of size {n}"
                )
            if hi is not None and hi > n:
                raise OutOfBoundsError(
                    f"{where} index range [{lo or 0}, {hi - 1}] exceeds dimension size {n}"
                )
            start, stop, step = slice(lo, hi, step).indices(n)
            count = len(range(start, stop, step))
            offset += start * s if count else 0
            shape.append(count)
            strides.append(s * step)
        else:
            i = index_value(k, f"{where} index")
            if i < 0:
                i += n
            if not 0 <= i < n:
                raise OutOfBoundsError(f"{where} index {k} is out of range for size {n}")
            offset += i * s
            int_dims.append(len(shape))
            shape.append(1)
            strides.append(s)
    return _drop_int_dims(lay, offset, shape, strides, int_dims, on_chip)


def _drop_int_dims(
    lay: Layout,
    offset: int,
    shape: list[int],
    strides: list[int],
    int_dims: list[int],
    on_chip: bool,
) -> tuple[Layout, list[int]]:
    """The indexed layout, and for each result dim the source dim it came from."""
    # On chip: an int on dim 0 keeps a size-1 partition dim; ints on free dims drop them
    # unless the result would fall below 2-D. In HBM ints drop dims (result at least 1-D).
    if not int_dims:
        return Layout(lay.dtype, offset, tuple(shape), tuple(strides)), list(range(len(shape)))
    drop = [d for d in int_dims if not (on_chip and d == 0)]
    keep_min = 2 if on_chip else 1
    while drop and len(shape) - len(drop) < keep_min:
        drop.pop()  # keep the last int dims as size 1
    kept = [d for d in range(len(shape)) if d not in drop]
    out = Layout(lay.dtype, offset, tuple(shape[d] for d in kept), tuple(strides[d] for d in kept))
    return out, kept


def indexed(lay: Layout, key: Any, on_chip: bool) -> Layout | None:
    """simple_index_layout's Layout, remembered on `lay` per key: a kernel's loops index the
    same tiles with the same few keys. None when the key is not a simple one."""
    sig = _key_signature(key)
    if sig is not None:
        sig = (on_chip, sig)  # ints drop dims differently on chip and in HBM
    memo = lay.__dict__.get("_indexed")
    if memo is None:
        memo = lay.__dict__["_indexed"] = {}
    got = memo.get(sig) if sig is not None else None
    if got is None:
        simple = simple_index_layout(lay, key, on_chip)
        if simple is None:
            return None
        got = interned(simple[0])
        if sig is not None:
            if len(memo) >= 256:
                memo.clear()
            memo[sig] = got
    return got


def _key_signature(key: Any) -> tuple | None:
    """A hashable form of an index key made of Python ints and slices of ints (None
    otherwise): slices are not hashable before Python 3.12."""
    if type(key) is not tuple:
        key = (key,)
    out = []
    for k in key:
        tk = type(k)
        if tk is slice:
            lo, hi, st = k.start, k.stop, k.step
            if not (
                (lo is None or type(lo) is int)
                and (hi is None or type(hi) is int)
                and (st is None or type(st) is int)
            ):
                return None
            out.append((lo, hi, st))
        elif tk is int:
            out.append(k)
        else:
            return None
    return tuple(out)


def simple_index_layout(lay: Layout, key: Any, on_chip: bool) -> tuple[Layout, list[int]] | None:
    """index_layout for the common keys: in-range ints and unit-step slices with non-negative
    int bounds. None for anything else (then index_layout gives the result or the error)."""
    if type(key) is not tuple:
        key = (key,)
    full_shape, full_strides = lay.shape, lay.strides
    if len(key) > len(full_shape):
        return None
    offset = lay.offset
    shape: list[int] = []
    strides: list[int] = []
    int_dims: list[int] = []
    for k, n, s in zip(key, full_shape, full_strides, strict=False):
        tk = type(k)
        if tk is slice:
            lo, hi, step = k.start, k.stop, k.step
            if step is not None and (type(step) is not int or step != 1):
                return None
            if lo is None:
                lo = 0
            elif type(lo) is not int or not 0 <= lo <= n:
                return None
            if hi is None:
                hi = n
            elif type(hi) is not int or not 0 <= hi <= n:
                return None
            count = hi - lo if hi > lo else 0
            if count:
                offset += lo * s
            shape.append(count)
        elif tk is int and 0 <= k < n:
            offset += k * s
            int_dims.append(len(shape))
            shape.append(1)
        else:
            return None
        strides.append(s)
    rest = len(key)
    shape.extend(full_shape[rest:])
    strides.extend(full_strides[rest:])
    return _drop_int_dims(lay, offset, shape, strides, int_dims, on_chip)


def select_dim(lay: Layout, d: int, i: int, name: str) -> Layout:
    """Static select: element i of dim d, dim removed."""
    n = lay.shape[d]
    if i < 0:
        i += n
    if not 0 <= i < n:
        raise OutOfBoundsError(
            f"{tensor_label(name)} dimension {d}: select index {i} is out of range for size {n}"
        )
    return Layout(
        lay.dtype,
        lay.offset + i * lay.strides[d],
        lay.shape[:d] + lay.shape[d + 1 :],
        lay.strides[:d] + lay.strides[d + 1 :],
    )
