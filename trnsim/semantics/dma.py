"""Semantics of DMA instructions (dma_copy, dma_transpose, dma_compute). Pure numpy.

Operands are Views. A view with a runtime address (`view.dynamic`, from NkiTensor.ap(
scalar_offset=/vector_offset=), .select or .vector_select) is gathered and scattered through
`view.element_positions()` when the instruction executes, so index tiles and registers are read
at that moment. A runtime index outside the indexed dimension raises OutOfBoundsError, or with
oob_mode=skip drops the affected elements (a whole row for a vector offset, the whole transfer
for a scalar offset). Rules the YAML vocabulary cannot say live in _dma_rules.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trnsim import dtypes as dt
from trnsim import wide_fp
from trnsim.errors import ConstraintError, OutOfBoundsError, RuntimeIndexError
from trnsim.memory import View
from trnsim.semantics import _ops, semantics
from trnsim.semantics._dma_rules import (  # noqa: F401 - check functions named in dma.yaml
    check_dma_compute,
    check_dma_copy,
    check_dma_transpose,
    mode_name,
    transpose_axes,
)


# ---------------------------------------------------------------- element access
def _dynamic(v: View) -> Any:
    return getattr(v, "dynamic", None)


def _positions(v: View) -> tuple[np.ndarray, np.ndarray]:
    """Storage positions (the view's shape) and their runtime validity."""
    if hasattr(v, "element_positions"):
        return v.element_positions()
    lay = v.layout
    pos = np.full(lay.shape, lay.offset, dtype=np.int64)
    for k, (n, s) in enumerate(zip(lay.shape, lay.strides, strict=True)):
        shape = tuple(n if i == k else 1 for i in range(len(lay.shape)))
        pos += (np.arange(n, dtype=np.int64) * s).reshape(shape)
    return pos, np.ones(lay.shape, dtype=bool)


def _storage(v: View) -> np.ndarray:
    """The buffer's memory typed as the view's dtype: 1-D (HBM) or (partitions, F) on chip."""
    raw = v.buffer.raw()
    isz = v.dtype.itemsize
    if v.buffer.on_chip:
        return raw[:, : raw.shape[1] // isz * isz].view(v.dtype.storage)
    return raw[: raw.shape[0] // isz * isz].view(v.dtype.storage)


def _index(store: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, ...]:
    return tuple(np.divmod(pos, store.shape[1])) if store.ndim == 2 else (pos,)


def _oob_error(instr: str, name: str, v: View, ok: np.ndarray) -> OutOfBoundsError:
    bad = tuple(int(i) for i in np.argwhere(~ok)[0])
    dyn = _dynamic(v)
    label = getattr(v.buffer, "label", None) or f"tensor '{v.name}'"
    where = f"{instr}: operand '{name}' element {bad} of {label}"
    skip = "pass oob_mode=nisa.oob_mode.skip to skip out-of-bounds rows"
    size = v.buffer.nbytes // v.dtype.itemsize if not v.buffer.on_chip else _storage(v).size
    bound, what = (dyn.bound, f"the indexed dimension of the {v.buffer.space} tensor") if (
        dyn is not None and dyn.bound is not None) else (None, "")
    if dyn is not None and bound is None and dyn.kind == "scalar" and dyn.multiplier > 0:
        # .ap(scalar_offset=): bounded by the tensor (nki-api.md §4.2), counted in rows of
        # the indexed dimension's stride
        bound = size // dyn.multiplier
        what = f"rows of {dyn.multiplier} elements in the {v.buffer.space} tensor"
    if bound is not None:
        offs = dyn.offsets()
        k = 0 if dyn.kind == "scalar" else bad[dyn.dim if dyn.dim is not None else 0]
        value = int(offs[min(k, offs.size - 1)])
        pos, _ = _positions(v)
        flat = int(pos[bad])
        index_text = f"index {flat} is out of bounds for axis 0 with size {size}"
        if not 0 <= value < bound:
            return RuntimeIndexError(
                f"{where}: runtime {dyn.kind} offset {value} is outside [0, {bound}) "
                f"({what}); {skip}",
                index_text,
            )
        # The offset is valid but the access pattern walks past the end: name the index
        # actually reached (offset + the pattern's own rows).
        rows = (flat - value * dyn.multiplier) // max(dyn.multiplier, 1)
        return RuntimeIndexError(
            f"{where}: runtime {dyn.kind} offset {value} plus {rows} rows of the access "
            f"pattern reaches index {value + rows}, outside [0, {bound}) ({what}); {skip}",
            index_text,
        )
    return OutOfBoundsError(f"{where}: the runtime address is outside the {v.buffer.space} tensor")


def gather(instr: str, name: str, v: View, skip: bool) -> tuple[np.ndarray, np.ndarray]:
    """(values in storage dtype, in-bounds mask), both of the view's shape."""
    if _dynamic(v) is None:
        return v.read(), np.ones(v.shape, dtype=bool)
    pos, valid = _positions(v)
    store = _storage(v)
    ok = valid & (pos >= 0) & (pos < store.size)
    if not skip and not ok.all():
        raise _oob_error(instr, name, v, ok)
    return store[_index(store, np.where(ok, pos, 0))], ok


def scatter(
    instr: str,
    name: str,
    v: View,
    values: np.ndarray,
    ok: np.ndarray,
    skip: bool,
    rmw: bool = False,
) -> None:
    """Store `values` (the view's shape) where `ok`, converting via fp32 when dtypes differ.

    rmw: add onto the current contents in fp32 (repeated positions accumulate in order).
    """
    # tfloat32 shares float32 storage: writing into it must still round to 10 mantissa bits.
    same = values.dtype == v.dtype.storage and v.dtype.name != "tfloat32"
    if _dynamic(v) is None and not rmw and ok.all():
        if same:
            v.write_raw(values)
        else:
            v.write(dt.to_float32(values))
        return
    pos, valid = _positions(v)
    store = _storage(v)
    dst_ok = valid & (pos >= 0) & (pos < store.size)
    if not skip and not dst_ok.all():
        raise _oob_error(instr, name, v, dst_ok)
    m = ok & dst_ok
    sel_pos, sel_vals = pos[m], values[m]
    if not rmw:
        store[_index(store, sel_pos)] = (
            sel_vals if same else dt.cast(dt.to_float32(sel_vals), v.dtype)
        )
        return
    add = dt.to_float32(sel_vals)
    for r in _rounds(sel_pos):
        idx = _index(store, sel_pos[r])
        cur = dt.to_float32(store[idx])
        store[idx] = dt.cast(cur + add[r], v.dtype)


def _rounds(pos: np.ndarray) -> list[np.ndarray]:
    """Split element indices into rounds with distinct positions, keeping their order
    (a read-modify-write of a repeated address sees the previous write)."""
    if pos.size == 0:
        return []
    order = np.argsort(pos, kind="stable")
    sp = pos[order]
    new_group = np.r_[True, sp[1:] != sp[:-1]]
    starts = np.flatnonzero(new_group)
    group = np.cumsum(new_group) - 1
    rank = np.empty(pos.size, dtype=np.int64)
    rank[order] = np.arange(pos.size) - starts[group]
    return [np.flatnonzero(rank == r) for r in range(int(rank.max()) + 1)]


# ---------------------------------------------------------------- instructions
@semantics("dma_copy")
def dma_copy(
    core: Any,
    *,
    engine: str,
    dst: View,
    src: View,
    oob_mode: Any = "error",
    dge_mode: Any = "unknown",
    dst_rmw_op: Any = None,
    **_: Any,
) -> None:
    """dst = src in row-major element order; dtypes differ: src -> fp32 -> dst.
    dst_rmw_op=add (Beta 1): dst += src, in fp32."""
    skip = mode_name(oob_mode, "oob_mode") == "skip"
    rmw = _ops.op_name(dst_rmw_op, "dst_rmw_op") is not None
    if not rmw and _dynamic(src) is None and _dynamic(dst) is None:
        # Static addresses (the common case): gather + scatter without the copy and the mask
        # (numpy copies overlapping source memory itself before assigning).
        if wide_fp.kept(src):  # NKI_PRECISE_FP=0: the kept fp32 values move
            dst.write(src.read_f32().reshape(dst.shape))
            return
        vals = src.array()
        if vals.shape != tuple(dst.shape):
            vals = vals.reshape(dst.shape)
        if vals.dtype == dst.dtype.storage and dst.dtype.name != "tfloat32":
            dst.write_raw(vals)
        else:
            dst.write(dt.to_float32(vals))
        return
    vals, ok = gather("dma_copy", "src", src, skip)
    scatter("dma_copy", "dst", dst, vals.reshape(dst.shape), ok.reshape(dst.shape), skip, rmw)


@semantics("dma_transpose")
def dma_transpose(
    core: Any,
    *,
    engine: str,
    dst: View,
    src: View,
    axes: Any = None,
    oob_mode: Any = "error",
    **_: Any,
) -> None:
    """dst = src.transpose(axes); an indirect src gathers its rows first."""
    skip = mode_name(oob_mode, "oob_mode") == "skip"
    perm = transpose_axes(src.ndim, axes)
    vals, ok = gather("dma_transpose", "src", src, skip)
    scatter("dma_transpose", "dst", dst, np.transpose(vals, perm), np.transpose(ok, perm), skip)


def _same_access(a: View, b: View) -> bool:
    da, db = _dynamic(a), _dynamic(b)
    if a.buffer is not b.buffer or a.layout != b.layout or (da is None) != (db is None):
        return False
    return da is None or (
        da.kind == db.kind
        and da.index is db.index
        and da.multiplier == db.multiplier
        and da.dim == db.dim
    )


@semantics("dma_compute")
def dma_compute(
    core: Any,
    *,
    engine: str,
    dst: View,
    reduce_op: Any = "add",
    scales: Any = None,
    unique_indices: bool = True,
    oob_mode: Any = "error",
    **operands: Any,
) -> None:
    """dst = sum_i srcs[i] * scales[i] in fp32. A source that is dst itself (the vector_offset
    scatter-RMW form) makes it dst += the others, accumulating repeated indices in order."""
    skip = mode_name(oob_mode, "oob_mode") == "skip"
    srcs = [operands[f"src{i}"] for i in range(16) if operands.get(f"src{i}") is not None]
    scale = [1.0] * len(srcs) if scales is None else [float(s) for s in scales]
    rmw = [i for i, s in enumerate(srcs) if _same_access(s, dst)]
    if unique_indices:
        _check_unique("dma_compute", dst)
    total = np.zeros(dst.shape, dtype=np.float32)
    ok = np.ones(dst.shape, dtype=bool)
    for i, s in enumerate(srcs):
        if rmw and i == rmw[0]:
            continue
        vals, s_ok = gather("dma_compute", f"srcs[{i}]", s, skip)
        total += dt.to_float32(vals).reshape(dst.shape) * np.float32(scale[i])
        ok &= s_ok.reshape(dst.shape)
    scatter("dma_compute", "dst", dst, total, ok, skip, rmw=bool(rmw))


def _check_unique(instr: str, v: View) -> None:
    dyn = _dynamic(v)
    if dyn is None or dyn.kind != "vector":
        return
    offs = dyn.offsets()[: v.shape[dyn.dim or 0]]
    vals, counts = np.unique(offs, return_counts=True)
    if (counts > 1).any():
        raise ConstraintError(
            f"{instr}: unique_indices=True but index {int(vals[counts > 1][0])}"
            f" appears {int(counts[counts > 1][0])} times in the dst offsets "
            "(a read-modify-write race on hardware); pass "
            "unique_indices=False"
        )
