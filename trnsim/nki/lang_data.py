"""nki.language convenience wrappers, data movement: load/store/copy, transpose, matmul,
broadcast_to, where, gather_flattened, dropout. Each issues the instructions the docs name."""

from __future__ import annotations

from typing import Any

from trnsim import dtypes as _dt
from trnsim.errors import ConstraintError
from trnsim.nki._isa_base import language_function
from trnsim.nki.lang_ops import (
    _isa,
    _new,
    _nl,
    _scalar_value,
    _tile,
    not_equal,
)
from trnsim.nki.tensor import NkiTensor, as_dtype

__all__ = [
    "broadcast_to",
    "copy",
    "dropout",
    "expand_dims",
    "gather_flattened",
    "load",
    "load_transpose2d",
    "matmul",
    "store",
    "transpose",
    "where",
]


# ---------------------------------------------------------------- data movement
@language_function
def load(src: Any, dtype: Any = None) -> NkiTensor:
    """HBM -> a new SBUF tile shaped like src (one dma_copy)."""
    if not isinstance(src, NkiTensor) or src.buffer.on_chip:
        where = src.buffer.space if isinstance(src, NkiTensor) else type(src).__name__
        raise ConstraintError(f"nl.load: src must be an HBM tensor, got {where}")
    out = _new(src.shape, dtype or src.dtype, "load")
    _isa().dma_copy(dst=out, src=src)
    return out


@language_function
def store(dst: Any, value: Any) -> None:
    """An SBUF tile -> HBM (one dma_copy); PSUM values must be copied to SBUF first (GA)."""
    if not isinstance(dst, NkiTensor) or dst.buffer.on_chip:
        where = dst.buffer.space if isinstance(dst, NkiTensor) else type(dst).__name__
        raise ConstraintError(f"nl.store: dst must be an HBM tensor, got {where}")
    value = _tile(value, "store", "value")
    if value.buffer.space == "psum":
        raise ConstraintError(
            "nl.store: value is in psum; the DMA cannot read PSUM (copy it to "
            "SBUF first, e.g. nl.copy or nisa.tensor_copy)"
        )
    _isa().dma_copy(dst=dst, src=value)


@language_function
def load_transpose2d(src: Any, dtype: Any = None) -> NkiTensor:
    """HBM [a, b] -> SBUF [b, a]: a DMA with a transposing (element-strided) access pattern."""
    if not isinstance(src, NkiTensor) or src.buffer.on_chip or src.ndim != 2:
        raise ConstraintError("nl.load_transpose2d: src must be a 2-D HBM tensor")
    out = _new((src.shape[1], src.shape[0]), dtype or src.dtype, "load_transpose2d")
    _isa().dma_copy(dst=out, src=src.permute((1, 0)))
    return out


@language_function
def copy(x: Any, dtype: Any = None) -> NkiTensor:
    """A copy of the tile in SBUF (VectorE tensor_copy: bit-exact for equal dtypes).

    The 0.6.0 docs define copy as a tensor_copy whose result is always in SBUF (nki-api.md
    §6.1): `nl.copy(result_psum)` is the PSUM -> SBUF idiom before nl.store.
    """
    x = _tile(x, "copy")
    out = _new(x.shape, dtype or x.dtype, "copy")
    _isa().tensor_copy(dst=out, src=x)
    return out


@language_function
def broadcast_to(x: Any, shape: Any, dtype: Any = None) -> NkiTensor:
    """numpy broadcast of size-1 dims (same rank): free dims via a stride-0 view + VectorE
    copy, the partition dim via a DMA that repeats the source partition."""
    x = _tile(x, "broadcast_to")
    shape = tuple(int(s) for s in shape)
    if len(shape) != x.ndim:
        raise ConstraintError(
            f"nl.broadcast_to: shape {list(shape)} must have the rank of x {list(x.shape)}"
        )
    if shape == tuple(x.shape):
        return x if dtype is None or as_dtype(dtype) == x.dtype else copy(x, dtype)
    view = x
    for d, (have, want) in enumerate(zip(x.shape, shape, strict=True)):
        if have == want:
            continue
        if have != 1:
            raise ConstraintError(
                f"nl.broadcast_to: dimension {d} has size {have}; only size-1 "
                f"dimensions broadcast (to {want})"
            )
        if d == 0:
            view = type(view)(view.buffer, _partition_broadcast(view.layout, want))
        else:
            view = view.broadcast(d, want)
    out = _new(shape, dtype or x.dtype, "broadcast_to")
    if shape[0] != x.shape[0]:
        _isa().dma_copy(dst=out, src=view)
    else:
        _isa().tensor_copy(dst=out, src=view)
    return out


def _partition_broadcast(lay: Any, n: int) -> Any:
    from trnsim.memory import Layout

    return Layout(lay.dtype, lay.offset, (n, *lay.shape[1:]), (0, *lay.strides[1:]))


@language_function
def expand_dims(x: Any, axis: int) -> NkiTensor:
    """A view of x with a size-1 axis inserted at `axis` (no data movement)."""
    if not isinstance(x, NkiTensor):
        raise ConstraintError(f"nl.expand_dims: x must be a tensor, got {type(x).__name__}")
    return x.expand_dim(axis)


@language_function
def transpose(x: Any, dtype: Any = None) -> NkiTensor:
    """2-D partition <-> free swap: TensorE into PSUM, or VectorE (SBUF) up to 32 x 32."""
    x = _tile(x, "transpose")
    if x.ndim != 2:
        raise ConstraintError(f"nl.transpose: x must be 2-D, got shape {list(x.shape)}")
    nl = _nl()
    small = x.shape[0] <= 32 and x.shape[1] <= 32
    out = _new((x.shape[1], x.shape[0]), x.dtype, "transpose", nl.sbuf if small else nl.psum)
    engine = _isa().engine.vector if small else _isa().engine.tensor
    _isa().nc_transpose(dst=out, data=x, engine=engine)
    if dtype is not None and as_dtype(dtype) != x.dtype:
        return copy(out, dtype)
    return out


@language_function
def matmul(x: Any, y: Any, transpose_x: bool = False) -> NkiTensor:
    """x @ y (or x.T @ y with transpose_x=True, x given as [K, M]) on the Tensor Engine;
    the fp32 result lands in PSUM. Without transpose_x, x is transposed first."""
    x = _tile(x, "matmul", "x")
    y = _tile(y, "matmul", "y")
    nl = _nl()
    if not transpose_x:
        xt = transpose(x)
        if xt.buffer.space == "psum":
            xt = copy_to_sbuf(xt)
        x = xt
    if x.shape[0] != y.shape[0]:
        raise ConstraintError(
            f"nl.matmul: contraction sizes differ: x has {x.shape[0]} rows "
            f"on the partition axis (after transpose_x={transpose_x}), y has "
            f"{y.shape[0]}"
        )
    out = _new((x.shape[1], *y.shape[1:]), _dt.float32, "matmul", nl.psum)
    _isa().nc_matmul(dst=out, stationary=x, moving=y)
    return out


def copy_to_sbuf(t: NkiTensor) -> NkiTensor:
    out = _new(t.shape, t.dtype, "copy")
    _isa().tensor_copy(dst=out, src=t)
    return out


@language_function
def gather_flattened(data: Any, indices: Any, axis: int = 0, dtype: Any = None) -> NkiTensor:
    """Per partition, out = data_row.flatten()[indices_row] (GpSimd nc_n_gather)."""
    data = _tile(data, "gather_flattened", "data")
    indices = _tile(indices, "gather_flattened", "indices")
    out = _new(indices.shape, dtype or data.dtype, "gather_flattened")
    _isa().nc_n_gather(dst=out, data=data, indices=indices)
    return out


@language_function
def where(condition: Any, x: Any, y: Any, dtype: Any = None) -> NkiTensor:
    """x where condition (1.0 / 0.0 tile) is non-zero, else y (VectorE predicated copy)."""
    condition = _tile(condition, "where", "condition")
    ref = x if isinstance(x, NkiTensor) else y
    if not isinstance(ref, NkiTensor):
        raise ConstraintError("nl.where: x or y must be a tile")
    nisa = _isa()
    out = _new(condition.shape, dtype or ref.dtype, "where")
    if isinstance(y, NkiTensor):
        nisa.tensor_copy(dst=out, src=_tile(y, "where", "y"))
    else:
        nisa.memset(dst=out, value=_scalar_value(y))
    src = x
    if isinstance(x, NkiTensor) and x.dtype != out.dtype:
        src = _new(x.shape, out.dtype, "where")
        nisa.tensor_copy(dst=src, src=x)
    pred = condition
    if condition.dtype.name not in ("uint8", "uint16", "uint32"):
        pred = _new(condition.shape, _dt.uint8, "where")
        nisa.tensor_scalar(dst=pred, data=condition, op0=not_equal, operand0=0.0)
    nisa.tensor_copy_predicated(dst=out, src=src, predicate=pred)
    return out


@language_function
def dropout(x: Any, rate: Any, dtype: Any = None) -> NkiTensor:
    """Zero each element with probability `rate` (VectorE nisa.dropout)."""
    x = _tile(x, "dropout")
    out = _new(x.shape, dtype or x.dtype, "dropout")
    _isa().dropout(dst=out, data=x, prob=rate)
    return out
