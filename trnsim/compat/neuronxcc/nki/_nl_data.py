"""Beta-1 nl data movement and tile construction: load, store, load_transpose2d, copy,
broadcast_to, expand_dims, transpose, matmul, atomic_rmw, gather_flattened, where, dropout,
device_print.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from trnsim import dtypes as dt
from trnsim.compat.neuronxcc.nki import _copy
from trnsim.compat.neuronxcc.nki import _math as M
from trnsim.compat.neuronxcc.nki._emit import run, single
from trnsim.compat.neuronxcc.nki._errors import b1_error
from trnsim.compat.neuronxcc.nki._index import as_mask, input_space_mask
from trnsim.compat.neuronxcc.nki._indirect import IndirectAccess
from trnsim.compat.neuronxcc.nki._state import api, context, here
from trnsim.compat.neuronxcc.nki._tensor import tensor
from trnsim.errors import ConstraintError

PMAX = 128  # partitions per tile (pmax)
GEMM_STATIONARY_FMAX = 128  # stationary free size (M) limit of nc_matmul
PE_COLUMNS = 128  # columns of the PE array (tile_position / tile_size)
GEMM_MOVING_FMAX = 512  # moving free size (N) limit of nc_matmul on NC-v2/v3


def _hbm_source(src: Any, api_name: str) -> Any:
    if isinstance(src, IndirectAccess):
        return src
    if not isinstance(src, tensor):
        raise ConstraintError(f"{api_name}: src must be an HBM tensor, got {type(src).__name__}")
    src._ready()
    if src.on_chip:
        raise b1_error(
            ConstraintError,
            "err_unsupported_memory",
            f"Expected operand 'src' of '{api_name}' to be in address space 'hbm', "
            f"but got a tile in '{src.space}' instead.",
        )
    if src.ndim < 2:
        raise ConstraintError(
            f"{api_name}: `{src.name}` is {src.ndim}-D; an SBUF tile needs a "
            "partition and a free dimension (reshape it, e.g. "
            "t.reshape((1, n)))"
        )
    return src


@api("nl.load")
def load(src: Any, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> tensor:
    """HBM -> a new SBUF tile shaped like src (DMA); an index tile on the first dimension
    gathers rows (`data[idx[i_p, 0], i_f]`)."""
    src = _hbm_source(src, "nl.load")
    if src.shape[0] > PMAX:
        raise b1_error(
            ConstraintError,
            "err_num_partition_exceed_arch_limit",
            f"nl.load: number of partitions {src.shape[0]} exceed architecture "
            f"limitation of {PMAX}.",
        )
    odt = M.out_dtype(dtype, src.dtype)
    return single(
        "dma_copy",
        shape=tuple(src.shape),
        dtype=odt,
        inputs={"src": src},
        mask=mask,
        label="nl.load",
    )


@api("nl.store")
def store(dst: Any, value: Any, *, mask: Any = None, **kwargs: Any) -> None:
    """value (SBUF, or PSUM through a copy) -> HBM dst (DMA)."""
    if isinstance(dst, IndirectAccess):
        _copy.store_indirect(dst, value, mask=as_mask(mask))
        return
    if not isinstance(dst, tensor) or dst.on_chip:
        space = dst.space if isinstance(dst, tensor) else type(dst).__name__
        raise b1_error(
            ConstraintError,
            "err_unsupported_memory",
            f"Expected operand 'dst' of 'nl.store' to be in address space 'hbm', "
            f"but got a tile in '{space}' instead.",
        )
    if isinstance(value, _copy.SCALARS):
        # AWS's nl.store example stores a Python scalar ("effectively a memset"): the value
        # goes through a memset tile of dst's shape and dtype, then the DMA.
        value = single(
            "memset",
            shape=tuple(dst.shape),
            dtype=dst.dtype,
            inputs={"value": value},
            mask=mask,
            label="nl.store",
        )
    if not isinstance(value, tensor):
        raise ConstraintError(
            f"nl.store: value must be a tile or a scalar, got {type(value).__name__}"
        )
    _copy.copy_into(dst, value, mask=as_mask(mask), what="nl.store")


@api("nl.load_transpose2d")
def load_transpose2d(src: Any, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> tensor:
    """HBM [a, b] -> SBUF [b, a]: a DMA whose source walks src column by column."""
    if isinstance(src, IndirectAccess):
        raise b1_error(
            ConstraintError,
            "err_indirect_indices_are_not_supported_with_nki_api",
            "cannot use indirect indexing access with the current NKI API for load_transpose2d",
        )
    src = _hbm_source(src, "nl.load_transpose2d")
    if src.ndim != 2:
        raise ConstraintError(f"nl.load_transpose2d: src must be 2-D, got {list(src.shape)}")
    view = src.permuted((1, 0))
    return single(
        "dma_copy",
        shape=tuple(view.shape),
        dtype=M.out_dtype(dtype, src.dtype),
        inputs={"src": view},
        mask=input_space_mask(mask, tuple(src.shape), (1, 0)),
        label="nl.load_transpose2d",
    )


def copy_tile(x: Any, *, dtype: Any = None, mask: Any = None) -> tensor:
    """nl.copy: a new SBUF tile (tensor_copy; a DMA when x is in HBM)."""
    if isinstance(x, tensor) and not x._ready().on_chip:
        return single(
            "dma_copy",
            shape=tuple(x.shape),
            dtype=M.out_dtype(dtype, x.dtype),
            inputs={"src": x},
            mask=mask,
            label="nl.copy",
        )
    x = M.tile(x, "nl.copy", "src")
    return single(
        "tensor_copy",
        shape=tuple(x.shape),
        dtype=M.out_dtype(dtype, x.dtype),
        inputs={"src": x},
        mask=mask,
        label="nl.copy",
    )


@api("nl.broadcast_to")
def broadcast_to(src: Any, *, shape: Any, **kwargs: Any) -> tensor:
    """src copied into a new tile of `shape` (NumPy rules; partition broadcast by DMA)."""
    src = M.tile(src, "nl.broadcast_to", "src")
    shape = tuple(int(s) for s in shape)
    if shape == tuple(src.shape):
        return src
    out = M.fresh(shape, src.dtype, name="bcast")
    _copy.copy_into(out, src, what="nl.broadcast_to")
    return out


@api("nl.expand_dims", flush=False)
def expand_dims(data: Any, axis: int) -> tensor:
    """A view of data with a new size-1 axis (B1: after the last axis)."""
    return data.expand_dims(axis)


@api("nl.transpose")
def transpose(x: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> tensor:
    """2-D partition <-> free transpose: Vector engine up to 32x32, else the Tensor Engine
    (result in PSUM)."""
    x = M.tile(x, "nl.transpose", "x")
    if x.ndim > 2:
        raise b1_error(
            ConstraintError,
            "err_exceed_max_supported_dimension",
            f"parameter 'x{list(x.shape)}' of 'transpose' exceed max supported "
            "number of dimensions of 2.",
        )
    p, f = x.shape[0], M.free_elems(tuple(x.shape))
    if f > PMAX:
        raise b1_error(
            ConstraintError,
            "err_size_of_dimension_exceed_arch_limit",
            f"size of dimension 1 in 'x{list(x.shape)}' of 'transpose' exceed "
            f"architecture limitation of {PMAX}.",
        )
    small = p <= 32 and f <= 32
    if not small:
        no_pe_transpose("nl.transpose")
    if not small and x.space == "psum":
        x = M.to_sbuf(x)
    buffer = "sbuf" if small else "psum"
    odt = M.out_dtype(dtype, x.dtype)
    mask = input_space_mask(mask, (p, f), (1, 0)) if x.ndim == 2 else mask
    if odt == x.dtype:
        return single(
            "nc_transpose",
            shape=(f, p),
            dtype=odt,
            buffer=buffer,
            engine="vector" if small else "tensor",
            inputs={"data": x},
            axes={"data": (1, 0)},
            mask=mask,
            label="nl.transpose",
        )
    loc, loops = here()
    tmp = M.fresh((f, p), x.dtype, buffer, "transposed")
    run(
        "nc_transpose",
        "vector" if small else "tensor",
        domain=(f, p),
        outputs={"dst": (tmp, None)},
        inputs={"data": x},
        axes={"data": (1, 0)},
        mask=as_mask(mask),
        loc=loc,
        loops=loops,
    )
    return copy_tile(tmp, dtype=odt, mask=mask)


def no_pe_transpose(api_name: str) -> None:
    """Directly allocated kernels cannot transpose on the Tensor Engine (B1)."""
    _, st = context(api_name)
    if st.direct_alloc:
        raise b1_error(
            ConstraintError,
            "err_transpose_on_tensor_engine_not_allowed_in_allocated_kernel",
            f"{api_name}: a transpose on the Tensor Engine is not allowed in a kernel "
            "with direct allocation (ncc.sbuf / ncc.psum); pass transpose_x=True with "
            "a pre-transposed operand, or transpose tiles of at most 32x32 (Vector "
            "engine)",
        )


def _stationary(x: tensor, transpose_x: bool) -> tensor:
    """x as nc_matmul's stationary [K, M] in SBUF (a TensorE transpose when x is [M, K])."""
    if x.space == "psum":
        x = M.to_sbuf(x)
    if transpose_x:
        return x
    loc, loops = here()
    m, k = x.shape[0], M.free_elems(tuple(x.shape))
    if max(m, k) > 32:
        no_pe_transpose("nl.matmul (without transpose_x)")
    t = M.fresh((k, m), x.dtype, "psum", "xT")
    run(
        "nc_transpose",
        "tensor" if max(m, k) > 32 else "vector",
        domain=(k, m),
        outputs={"dst": (t, None)},
        inputs={"data": x},
        loc=loc,
        loops=loops,
    )
    return M.to_sbuf(t)


def matmul_pending(
    stationary: tensor, moving: tensor, mask: Any, api_name: str, attrs: dict | None = None
) -> tensor:
    """stationary.T @ moving into PSUM (fp32), accumulating under `psum += ...`."""
    # TensorE reads SBUF only: a PSUM operand is staged through SBUF, as the B1 compiler does
    # (AWS's flash attention backward multiplies an unassigned nc_transpose result, in PSUM)
    if moving.space == "psum":
        moving = M.to_sbuf(moving)
    if stationary.space == "psum":
        stationary = M.to_sbuf(stationary)
    k1, k2 = stationary.shape[0], moving.shape[0]
    if k1 != k2:
        raise b1_error(
            ConstraintError,
            "err_param_shape_incompatible_with_matmul",
            f"{api_name}: contraction dimensions differ: stationary "
            f"{list(stationary.shape)} and moving {list(moving.shape)} (K is the "
            "partition axis of both)",
        )
    m, n = M.free_elems(tuple(stationary.shape)), M.free_elems(tuple(moving.shape))
    double_row = (attrs or {}).get("perf_mode") == "double_row"
    if double_row:  # [K, 2, M] x [K, 2, N]: the pair axis is contracted (its shape is checked)
        m, n = m // 2, n // 2
    if m > GEMM_STATIONARY_FMAX:
        raise b1_error(
            ConstraintError,
            "err_size_of_dimension_exceed_arch_limit",
            f"size of dimension 1 in 'stationary{list(stationary.shape)}' of "
            f"'{api_name}' exceed architecture limitation of {GEMM_STATIONARY_FMAX}.",
        )
    st_axes = (None, 0) if stationary.ndim == 2 and not double_row else None
    mv_axes = (None, 1) if moving.ndim == 2 and not double_row else None
    return single(
        "nc_matmul",
        partition_offset=_pe_column_start(attrs),
        shape=(m, n),
        dtype=dt.float32,
        buffer="psum",
        inputs={"stationary": stationary, "moving": moving},
        axes={"stationary": st_axes, "moving": mv_axes},
        attrs=dict(attrs or {}),
        mask=mask,
        accumulate_attr="accumulate",
        label=api_name,
    )


def _pe_column_start(attrs: dict | None) -> int:
    """The PSUM partition a PE-tiled matmul's result starts at: the tile's start column when
    the column tile is narrower than the array (nki.isa.nc_matmul tile_position)."""
    pos, size = (attrs or {}).get("tile_position") or (), (attrs or {}).get("tile_size") or ()
    try:
        col, cols = int(pos[1]), int(size[1])
    except (IndexError, TypeError, ValueError):
        return 0  # malformed tile arguments are reported by the instruction's check
    return col if col > 0 and cols < PE_COLUMNS else 0


@api("nl.matmul")
def matmul(x: Any, y: Any, *, transpose_x: bool = False, mask: Any = None, **kwargs: Any) -> tensor:
    """x @ y (or x.T @ y with transpose_x=True, x given as [K, M]) on the Tensor Engine; the
    fp32 result is a PSUM tile (`psum += nl.matmul(...)` accumulates)."""
    x = M.tile(x, "nl.matmul", "x")
    y = M.tile(y, "nl.matmul", "y")
    return matmul_pending(_stationary(x, transpose_x), y, mask, "nl.matmul")


@api("nl.atomic_rmw")
def atomic_rmw(dst: Any, value: Any, op: Any, *, mask: Any = None, **kwargs: Any) -> None:
    """dst[idx rows] op= value in HBM through the DMA (op: add only)."""
    if M.op_label(op) not in ("add",):
        raise b1_error(
            ConstraintError,
            "err_atomic_rmw_add_only",
            f"atomic_rmw `op` param only supports 'add' operation currently. An "
            f"unsupported op={M.op_label(op)}",
        )
    if not isinstance(dst, IndirectAccess):
        raise b1_error(
            ConstraintError,
            "err_atomic_rmw_dynamic_index",
            "atomic_rmw `dst` only supports indirect dynamic indexing currently. Use "
            "a tile to index (dst[idx_tile[i_p, 0], i_f]).",
        )
    _copy.store_indirect(dst, value, mask=as_mask(mask), rmw_op="add")


@api("nl.gather_flattened")
def gather_flattened(
    data: Any, indices: Any, *, mask: Any = None, dtype: Any = None, **kwargs: Any
) -> tensor:
    """Per partition, the flattened free elements of data taken at uint32 indices (GpSimd)."""
    data = M.tile(data, "nl.gather_flattened", "data")
    indices = M.tile(indices, "nl.gather_flattened", "indices")
    return single(
        "nc_n_gather",
        shape=tuple(indices.shape),
        dtype=M.out_dtype(dtype, data.dtype),
        inputs={"data": data, "indices": indices},
        axes={"data": (0,)},
        mask=mask,
        label="nl.gather_flattened",
    )


@api("nl.where")
def where(
    condition: Any, x: Any, y: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any
) -> tensor:
    """condition ? x : y: y is written first, then x where the condition is non-zero
    (tensor_copy_predicated)."""
    cond = M.tile(condition, "nl.where", "condition")
    xs = x if not isinstance(x, tensor) else M.tile(x, "nl.where", "x")
    ys = y if not isinstance(y, tensor) else M.tile(y, "nl.where", "y")
    shape = tuple(cond.shape)
    base = next((t.dtype for t in (xs, ys) if isinstance(t, tensor)), dt.float32)
    odt = M.out_dtype(dtype, base)
    loc, loops = here()
    m = as_mask(mask)
    # tensor_copy_predicated takes uint8/16/32 predicates (nki-api.md); any other condition
    # (bool results, int8 masks as AWS's select_and_scatter makes with nl.equal(dtype=int8),
    # floats) becomes a uint8 predicate of its non-zero elements first
    pred = cond if cond.dtype.name in ("uint8", "uint16", "uint32") else _as_predicate(cond)

    def steps(dst: tensor, mode: str) -> None:
        if isinstance(ys, tensor):
            _copy.move(dst, _copy.fit(dst, ys, "nl.where"), mask=m, loc=loc, loops=loops)
        else:
            run(
                "memset",
                None,
                domain=shape,
                outputs={"dst": (dst, None)},
                inputs={"value": ys},
                mask=m,
                loc=loc,
                loops=loops,
            )
        src = _copy.fit(dst, xs, "nl.where") if isinstance(xs, tensor) else xs
        run(
            "tensor_copy_predicated",
            None,
            domain=shape,
            outputs={"dst": (dst, None)},
            inputs={"src": src, "predicate": pred},
            mask=m,
            loc=loc,
            loops=loops,
        )

    return M.composite(shape, odt, steps, "nl.where")


def _as_predicate(cond: tensor) -> tensor:
    """A bool/float condition as a uint8 predicate tile (1 where non-zero)."""
    out = M.fresh(tuple(cond.shape), dt.uint8, name="pred")
    loc, loops = here()
    run(
        "tensor_scalar",
        None,
        domain=tuple(cond.shape),
        outputs={"dst": (out, None)},
        inputs={"data": cond, "operand0": 0},
        attrs={
            "op0": "not_equal",
            "reverse0": False,
            "op1": None,
            "operand1": None,
            "reverse1": False,
        },
        loc=loc,
        loops=loops,
    )
    return out


@api("nl.dropout")
def dropout(x: Any, rate: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> tensor:
    """Zero each element with probability rate (Vector engine; no rescaling)."""
    x = M.tile(x, "nl.dropout", "x")
    return single(
        "dropout",
        shape=tuple(x.shape),
        dtype=M.out_dtype(dtype, x.dtype),
        inputs={"data": x, "prob": rate},
        mask=mask,
        label="nl.dropout",
    )


@api("nl.device_print")
def device_print(prefix: str, x: Any, *, mask: Any = None, **kwargs: Any) -> None:
    """Print a tensor's values (the simulator prints to stdout, as B1's simulate_kernel)."""
    ctx, _ = context("nl.device_print")
    if not isinstance(prefix, str):
        raise ConstraintError("nl.device_print: the prefix must be a constant string")
    if not ctx.device.values:
        return
    if isinstance(x, tensor):
        x._ready()
        values = x.operand().read()
        if x.dtype.is_float:
            values = dt.to_float32(values)
    else:
        values = np.asarray(x)
    sys.stdout.write(f"{prefix} {values}\n")
