"""Shape-changing Layout algebra behind NkiTensor: permute, broadcast, expand/squeeze,
reshape, flatten, dtype views, and the einops-style patterns of rearrange.

Pure functions Layout -> Layout, as in trnsim.nki.views (indexing); each raises
ConstraintError without a location (the calling NkiTensor method attaches the user's line).
"""

from __future__ import annotations

import math
from typing import Any

from trnsim import dtypes as dt
from trnsim.errors import ConstraintError
from trnsim.memory import Layout, row_major, tensor_label
from trnsim.nki.views import index_value

# ---------------------------------------------------------------- shape changes


def permute(lay: Layout, dims: tuple[int, ...]) -> Layout:
    return Layout(
        lay.dtype,
        lay.offset,
        tuple(lay.shape[d] for d in dims),
        tuple(lay.strides[d] for d in dims),
    )


def check_permutation(dims: Any, ndim: int) -> tuple[int, ...]:
    try:
        dims = tuple(index_value(d) for d in dims)
    except TypeError as e:
        raise ConstraintError(f"permute: dims {dims!r} must be a tuple of integers") from e
    dims = tuple(d + ndim if d < 0 else d for d in dims)
    if sorted(dims) != list(range(ndim)):
        raise ConstraintError(f"permute: dims {dims} are not a permutation of range({ndim})")
    return dims


def broadcast(lay: Layout, d: int, size: int, name: str) -> Layout:
    if lay.shape[d] != 1:
        raise ConstraintError(
            f"broadcast of {tensor_label(name)}: dimension {d} has size {lay.shape[d]}; "
            "only a size-1 dimension can be broadcast"
        )
    if size < 1:
        raise ConstraintError(f"broadcast of {tensor_label(name)}: size {size} must be >= 1")
    shape, strides = list(lay.shape), list(lay.strides)
    shape[d], strides[d] = size, 0
    return Layout(lay.dtype, lay.offset, tuple(shape), tuple(strides))


def expand_dim(lay: Layout, d: int) -> Layout:
    inner = lay.strides[d] * lay.shape[d] if d < len(lay.shape) else 1
    return Layout(
        lay.dtype,
        lay.offset,
        (*lay.shape[:d], 1, *lay.shape[d:]),
        (*lay.strides[:d], inner, *lay.strides[d:]),
    )


def squeeze_dim(lay: Layout, d: int, name: str) -> Layout:
    if lay.shape[d] != 1:
        raise ConstraintError(
            f"squeeze_dim of {tensor_label(name)}: dimension {d} has size {lay.shape[d]}; "
            "only a size-1 dimension can be removed"
        )
    return Layout(
        lay.dtype,
        lay.offset,
        lay.shape[:d] + lay.shape[d + 1 :],
        lay.strides[:d] + lay.strides[d + 1 :],
    )


def _infer_minus_one(total: int, shape: tuple[int, ...], what: str) -> tuple[int, ...]:
    if shape.count(-1) > 1:
        raise ConstraintError(f"{what}: at most one -1 allowed, got {list(shape)}")
    if -1 in shape:
        rest = math.prod(s for s in shape if s != -1)
        if rest == 0 or total % rest:
            raise ConstraintError(f"{what}: cannot infer -1 in {list(shape)} for {total} elements")
        shape = tuple(total // rest if s == -1 else s for s in shape)
    if any(s < 0 for s in shape):
        raise ConstraintError(f"{what}: negative size in {list(shape)}")
    return shape


def reshape_dim(lay: Layout, d: int, shape: tuple[int, ...], name: str) -> Layout:
    """Split dim d into `shape` (row-major inside the old dim's stride)."""
    what = f"reshape_dim of {tensor_label(name)}"
    shape = _infer_minus_one(lay.shape[d], tuple(index_value(s) for s in shape), what)
    if math.prod(shape) != lay.shape[d]:
        raise ConstraintError(
            f"{what}: {list(shape)} has {math.prod(shape)} elements but "
            f"dimension {d} has size {lay.shape[d]}"
        )
    sub = tuple(s * lay.strides[d] for s in row_major(shape))
    return Layout(
        lay.dtype,
        lay.offset,
        lay.shape[:d] + shape + lay.shape[d + 1 :],
        lay.strides[:d] + sub + lay.strides[d + 1 :],
    )


def dims_mergeable(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """True if the dims can merge into one strided dim (size-1 dims never matter)."""
    dims = [(n, s) for n, s in zip(shape, strides, strict=True) if n != 1]
    return all(dims[i][1] == dims[i + 1][0] * dims[i + 1][1] for i in range(len(dims) - 1))


def flatten_dims(lay: Layout, start: int, end: int, name: str) -> Layout:
    """Merge dims start..end (inclusive) into one; they must be contiguous in storage."""
    if start >= end:
        raise ConstraintError(
            f"flatten_dims of {tensor_label(name)}: start dimension {start} must be less "
            f"than end dimension {end}"
        )
    shp, st = lay.shape[start : end + 1], lay.strides[start : end + 1]
    if not dims_mergeable(shp, st):
        raise ConstraintError(
            f"flatten_dims of {tensor_label(name)}: dimensions {start}..{end} (shape "
            f"{list(shp)}, strides {list(st)}) are not contiguous in memory"
        )
    inner = next((s for n, s in reversed(list(zip(shp, st, strict=True))) if n != 1), 1)
    return Layout(
        lay.dtype,
        lay.offset,
        (*lay.shape[:start], math.prod(shp), *lay.shape[end + 1 :]),
        (*lay.strides[:start], inner, *lay.strides[end + 1 :]),
    )


def reshape(lay: Layout, shape: tuple[int, ...], on_chip: bool, name: str = "") -> Layout:
    """Reshape keeping element order (row-major); the partition dim stays on chip."""
    what = f"reshape of {tensor_label(name)}"
    shape = _infer_minus_one(lay.size, tuple(index_value(s) for s in shape), what)
    if math.prod(shape) != lay.size:
        raise ConstraintError(
            f"{what}: cannot reshape {list(lay.shape)} ({lay.size} elements) "
            f"into {list(shape)} ({math.prod(shape)} elements)"
        )
    if on_chip:
        if not shape or shape[0] != lay.shape[0]:
            raise ConstraintError(
                f"{what}: the partition dimension must stay {lay.shape[0]} on "
                f"chip, got {list(shape)}"
            )
        sub = _reshape_strides(lay.shape[1:], lay.strides[1:], shape[1:], what)
        return Layout(lay.dtype, lay.offset, shape, (lay.strides[0], *sub))
    return Layout(
        lay.dtype, lay.offset, shape, _reshape_strides(lay.shape, lay.strides, shape, what)
    )


def _reshape_strides(
    old: tuple[int, ...], strides: tuple[int, ...], new: tuple[int, ...], what: str
) -> tuple[int, ...]:
    """Strides for `new` over the elements of (old, strides), as numpy's no-copy reshape.

    Walks groups of old and new dims with equal products; each old group must be mergeable.
    """
    if math.prod(new) == 0:
        return row_major(new)
    o = [(n, s) for n, s in zip(old, strides, strict=True) if n != 1]
    oshape, ostr = [n for n, _ in o], [s for _, s in o]
    nstr = [1] * len(new)
    oi, oj, ni, nj = 0, 1, 0, 1
    while ni < len(new) and oi < len(oshape):
        np_, op = new[ni], oshape[oi]
        while np_ != op:
            if np_ < op:
                np_ *= new[nj]
                nj += 1
            else:
                op *= oshape[oj]
                oj += 1
        for k in range(oi, oj - 1):
            if ostr[k] != oshape[k + 1] * ostr[k + 1]:
                raise ConstraintError(
                    f"{what}: the view is not contiguous (shape {list(old)}, "
                    f"strides {list(strides)}); reshape to {list(new)} would "
                    "need a copy"
                )
        nstr[nj - 1] = ostr[oj - 1]
        for k in range(nj - 1, ni, -1):
            nstr[k - 1] = nstr[k] * new[k]
        ni, nj, oi, oj = nj, nj + 1, oj, oj + 1
    return tuple(nstr)


def view_dtype(lay: Layout, new: dt.DType, f_elems: int | None, name: str) -> Layout:
    """Bit reinterpretation: the last dim scales by the ratio of itemsizes.

    f_elems: elements per partition of the buffer in the old dtype (on chip), else None.
    """
    old = lay.dtype
    what = f"view of {tensor_label(name)} as {new.name}"
    if new.itemsize == old.itemsize:
        return Layout(new, lay.offset, lay.shape, lay.strides)
    if not lay.shape:
        raise ConstraintError(f"{what}: a 0-D view cannot change its element size")
    if lay.shape[-1] != 1 and lay.strides[-1] != 1:
        raise ConstraintError(
            f"{what}: the last dimension must be contiguous (stride 1), got "
            f"stride {lay.strides[-1]}"
        )
    if old.itemsize > new.itemsize:
        r = old.itemsize // new.itemsize
        return Layout(
            new,
            lay.offset * r,
            (*lay.shape[:-1], lay.shape[-1] * r),
            (*tuple(s * r for s in lay.strides[:-1]), 1),
        )
    k = new.itemsize // old.itemsize
    bad = [s for s in lay.strides[:-1] if s % k] + ([lay.offset] if lay.offset % k else [])
    if lay.shape[-1] % k or bad or (f_elems is not None and f_elems % k):
        raise ConstraintError(
            f"{what}: last dimension {lay.shape[-1]}, offset {lay.offset} and "
            f"strides {list(lay.strides[:-1])} must be multiples of {k} "
            f"({new.itemsize}-byte elements over {old.itemsize}-byte ones)"
        )
    return Layout(
        new,
        lay.offset // k,
        (*lay.shape[:-1], lay.shape[-1] // k),
        (*tuple(s // k for s in lay.strides[:-1]), 1),
    )


def is_contiguous(lay: Layout) -> bool:
    """Each non-size-1 dim's stride equals the product of the inner dims' sizes."""
    acc = 1
    for n, s in reversed(list(zip(lay.shape, lay.strides, strict=True))):
        if n != 1 and s != acc:
            return False
        acc *= n
    return True


# ---------------------------------------------------------------- rearrange


def parse_pattern(p: Any) -> list[str | tuple[str, ...]]:
    """An einops pattern as a list of names and name groups: ('b', ('h', 'w')) or 'b (h w)'."""
    if isinstance(p, str):
        out: list[str | tuple[str, ...]] = []
        group: list[str] | None = None
        for tok in p.replace("(", " ( ").replace(")", " ) ").split():
            if tok == "(":
                if group is not None:
                    raise ConstraintError(f"rearrange: nested groups in {p!r}")
                group = []
            elif tok == ")":
                if group is None:
                    raise ConstraintError(f"rearrange: unbalanced ')' in {p!r}")
                out.append(tuple(group))
                group = None
            elif group is not None:
                group.append(tok)
            else:
                out.append(tok)
        if group is not None:
            raise ConstraintError(f"rearrange: unbalanced '(' in {p!r}")
        return out
    out = []
    for e in p:
        if isinstance(e, str):
            out.append(e)
        elif isinstance(e, (tuple, list)) and all(isinstance(x, str) for x in e):
            out.append(tuple(e))
        else:
            raise ConstraintError(
                f"rearrange: pattern element {e!r} is not a name or a tuple of names"
            )
    return out


def atoms(pattern: list[str | tuple[str, ...]]) -> list[str]:
    names: list[str] = []
    for e in pattern:
        names.extend([e] if isinstance(e, str) else e)
    if len(set(names)) != len(names):
        raise ConstraintError(f"rearrange: repeated dimension name in {pattern}")
    return names
