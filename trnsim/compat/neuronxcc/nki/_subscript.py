"""Beta-1 subscripts: basic indexing (ints, slices, nl.ds, None) and advanced indexing
(nl.arange / nl.mgrid expressions) composed into a tensor's affine access map.

Each base dimension d of the result is `consts[d] + sum_k coefs[d][k] * i_k` over the result's
axes; slices are not clamped (B1 reports a trace-time out-of-bound access when an instruction
uses the view, after its mask). On chip, an int on the partition axis keeps a size-1 axis,
and results stay at least 2-D. Knows nothing about instructions.
"""

from __future__ import annotations

from typing import Any

from trnsim.compat.neuronxcc.nki import _indirect
from trnsim.compat.neuronxcc.nki._errors import b1_error
from trnsim.compat.neuronxcc.nki._index import IndexExpr, Predicate, broadcast_shapes
from trnsim.compat.neuronxcc.nki._tensor import tensor
from trnsim.errors import ConstraintError, OutOfBoundsError
from trnsim.nki.views import DynSlice


def index(t: tensor, key: Any) -> Any:
    """t[key]: an access, an indirect HBM access or a runtime-offset access."""
    key = key if isinstance(key, tuple) else (key,)
    if t.on_chip and any(isinstance(k, tensor) for k in key[1:]):
        # A 1x1 tile indexing a free dimension of an on-chip tensor is a runtime offset
        # (`src[ix, offsets[0, i], iz]` for nisa.tensor_copy_dynamic_src, as its docs' example
        # 1): the same access as `offsets[0, i] + 0`.
        zero = 0 if any(isinstance(k, IndexExpr) for k in key) else slice(0, 1)
        key = tuple(
            _indirect.DynIndex(k, zero) if j and isinstance(k, tensor) else k
            for j, k in enumerate(key)
        )

    if any(
        isinstance(k, _indirect.DynIndex)
        or (isinstance(k, DynSlice) and isinstance(k.start, tensor))
        for k in key
    ):
        return _indirect.DynamicAccess(t, key)
    if any(isinstance(k, tensor) for k in key):
        return _indirect.IndirectAccess(t, key)
    if any(isinstance(k, Predicate) for k in key):
        raise b1_error(
            ConstraintError,
            "err_unsupported_expression_in_mask",
            "operand masks inside subscripts (t[pred]) are not simulated; pass "
            "mask= to the instruction instead",
        )
    key = _expand_ellipsis(key, t.ndim)
    if any(isinstance(k, IndexExpr) for k in key):
        if any(isinstance(k, (slice, DynSlice)) for k in key):
            raise b1_error(
                ConstraintError,
                "err_unsupported_mixing_basic_advanced_tensor_indexing",
                f"tensor `{t.name or '?'}`: mixing basic tensor indexing "
                "(slices, nl.ds) and advanced tensor indexing (nl.arange, "
                "nl.mgrid) is not supported",
            )
        return advanced(t, key)
    return basic(t, key)


# basic() results per (access map, key) for keys of plain ints, slices and nl.ds: a kernel's
# loops subscript the same tensors with the same few keys. Holds plain data only.
_BASIC: dict[tuple, tuple] = {}


def _plain_key(key: tuple[Any, ...]) -> tuple | None:
    out = []
    for k in key:
        tk = type(k)
        if tk is int or k is None:
            out.append(k)
        elif tk is slice or tk is DynSlice:
            parts = (k.start, k.stop, k.step) if tk is slice else (k.start, k.size, k.step)
            if any(v is not None and type(v) is not int for v in parts):
                return None
            out.append((tk is slice, *parts))
        else:
            return None
    return tuple(out)


def basic(t: tensor, key: tuple[Any, ...]) -> tensor:
    """Ints, slices, nl.ds, None: each composes into the access map."""
    sig = _plain_key(key)
    if sig is not None:
        memo_key = (t._pdim, t.on_chip, len(t._base.shape), t._consts, t._coefs, t._shape, sig)
        got = _BASIC.get(memo_key)
        if got is not None:
            return t._derive(*got)
    out = _basic(t, key)
    if sig is not None:
        if len(_BASIC) >= 1 << 15:
            _BASIC.clear()
        _BASIC[memo_key] = (out._consts, out._coefs, out._shape)
    return out


def _basic(t: tensor, key: tuple[Any, ...]) -> tensor:
    consts = list(t._consts)
    coefs = [list(r) for r in t._coefs]
    n_base = len(consts)
    new_cols: list[list[int]] = []  # per new axis: coefficient per base dim
    shape: list[int] = []
    dropped: list[tuple[int, list[int]]] = []  # (position, column) of int-indexed axes
    pax = t.partition_axis()
    src = 0
    for k in key:
        if k is None:
            new_cols.append([0] * n_base)
            shape.append(1)
            continue
        if src >= t.ndim:
            raise ConstraintError(
                f"too many indices for tensor `{t.name or '?'}` of shape {list(t._shape)}"
            )
        col = [coefs[d][src] for d in range(n_base)]
        n = t._shape[src]
        if isinstance(k, (slice, DynSlice)):
            start, count, step = _slice_params(k, n)
            for d in range(n_base):
                consts[d] += col[d] * start
            new_cols.append([c * step for c in col])
            shape.append(count)
        else:
            i = _int_index(k, n)
            for d in range(n_base):
                consts[d] += col[d] * i
            if t.on_chip and src == pax:  # keep a size-1 partition axis
                new_cols.append(col)
                shape.append(1)
            else:
                dropped.append((len(shape), col))
        src += 1
    for k in range(src, t.ndim):
        new_cols.append([coefs[d][k] for d in range(n_base)])
        shape.append(t._shape[k])
    min_rank = min(2, len(t._base.shape))  # B1 tiles (and their HBM sources) stay 2-D
    while len(shape) < min_rank and dropped:  # on chip tiles stay at least 2-D
        pos, col = dropped.pop()
        new_cols.insert(pos, col)
        shape.insert(pos, 1)
    out_coefs = [[col[d] for col in new_cols] for d in range(n_base)]
    return t._derive(consts, out_coefs, tuple(shape))


def advanced(t: tensor, key: tuple[Any, ...]) -> tensor:
    """nl.arange / nl.mgrid expressions (and ints): the broadcast shape of the expressions."""
    for k in key:
        if isinstance(k, IndexExpr) and k.ndim == 1:
            raise b1_error(
                ConstraintError,
                "err_1d_arange_not_supported",
                f"tensor `{t.name or '?'}` indexed with a 1-D nl.arange is "
                "not supported; give it a 2-D shape with [:, None] or [None, :]",
            )
    if len(key) > t.ndim:
        raise ConstraintError(
            f"too many indices ({len(key)}) for tensor `{t.name or '?'}` of shape {list(t._shape)}"
        )
    exprs = [k for k in key if isinstance(k, IndexExpr)]
    res = broadcast_shapes(*(e.shape for e in exprs), what=f"indices of `{t.name}`")
    rank = len(res)
    rest = t._shape[len(key) :]  # implicit trailing axes stay as they are
    n_base = len(t._consts)
    consts = list(t._consts)
    coefs = [[0] * (rank + len(rest)) for _ in range(n_base)]
    for k, entry in enumerate(key):
        if isinstance(entry, IndexExpr):
            _, ecoefs = entry.aligned(rank)
            econst = entry.const
        else:
            ecoefs, econst = (0,) * rank, _int_index(entry, t._shape[k], check=False)
        for d in range(n_base):
            c = t._coefs[d][k]
            if c:
                consts[d] += c * econst
                for j in range(rank):
                    coefs[d][j] += c * ecoefs[j]
    for j in range(len(rest)):
        for d in range(n_base):
            coefs[d][rank + j] = t._coefs[d][len(key) + j]
    out = t._derive(consts, coefs, res + rest)
    check_partition_stride(out)
    return out


def check_partition_stride(t: tensor) -> None:
    if t._pdim is None:
        return
    row = t._coefs[t._pdim]
    live = [(k, c) for k, c in enumerate(row) if c and t._shape[k] > 1]
    if len(live) > 1 or any(abs(c) != 1 for _, c in live):
        raise ConstraintError(
            f"tensor `{t.name or '?'}`: the partition dimension must "
            "be indexed with unit stride along one axis (partition-dim "
            "striding is not supported); got coefficients "
            f"{[c for _, c in live]}"
        )


def _expand_ellipsis(key: tuple[Any, ...], ndim: int) -> tuple[Any, ...]:
    n_ell = sum(1 for k in key if k is Ellipsis)
    if n_ell > 1:
        raise ConstraintError("an index can have only one '...'")
    if not n_ell:
        return key
    i = key.index(Ellipsis)
    used = sum(1 for k in key if k is not None and k is not Ellipsis)
    return (*key[:i], *([slice(None)] * max(0, ndim - used)), *key[i + 1 :])


def _int_index(k: Any, n: int, check: bool = True) -> int:
    try:
        i = int(k.__index__()) if hasattr(k, "__index__") else int(k)
    except (TypeError, ValueError) as e:
        raise b1_error(
            ConstraintError,
            "err_unsupported_expression_in_mask",
            f"index {k!r} is not an integer, slice, nl.ds or index expression",
        ) from e
    if i < 0:
        i += n
    if check and not 0 <= i < n:
        raise b1_error(
            OutOfBoundsError,
            "err_tensor_access_out_of_bound",
            f"index {k} is out of range for a dimension of size {n}",
        )
    return i


def _slice_params(k: slice | DynSlice, n: int) -> tuple[int, int, int]:
    """(start, count, step) of a slice or nl.ds, without clamping (B1 errors instead)."""
    if isinstance(k, DynSlice):
        start, size, step = int(k.start), int(k.size), int(k.step)
        return start, size, step
    step = 1 if k.step is None else int(k.step)
    if step == 0:
        raise ConstraintError("slice step cannot be zero")
    start = (0 if step > 0 else n - 1) if k.start is None else int(k.start)
    stop = (n if step > 0 else -1) if k.stop is None else int(k.stop)
    if k.start is not None and start < 0:
        start += n
    if k.stop is not None and stop < 0:
        stop += n
    return start, len(range(start, stop, step)), step
