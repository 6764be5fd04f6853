"""Beta-1 nisa instructions, part 2: statistics, selection, GpSimd, DMA and the top-8 family."""

from __future__ import annotations

from typing import Any

import numpy as np

from trnsim import dtypes as dt
from trnsim.compat.neuronxcc.nki import _copy
from trnsim.compat.neuronxcc.nki import _math as M
from trnsim.compat.neuronxcc.nki._emit import run, single
from trnsim.compat.neuronxcc.nki._index import Predicate, as_mask, input_space_mask
from trnsim.compat.neuronxcc.nki._indirect import IndirectAccess
from trnsim.compat.neuronxcc.nki._isa_core import (
    FP32_MIN,
    _alu,
    _dtype,
    _eager,
    _side,
    _t,
    _tile_or_scalar,
    dge_mode,
)
from trnsim.compat.neuronxcc.nki._state import api, here
from trnsim.compat.neuronxcc.nki._tensor import tensor
from trnsim.errors import ConstraintError, UnsupportedError
from trnsim.nki._isa_base import oob_mode, reduce_cmd

_CMP_NAMES = {"<": "less", "<=": "less_equal", ">": "greater", ">=": "greater_equal", "==": "equal"}
BN_STATS_VALUES = 6  # count, mean, var*count for even and odd elements
TOP = 8  # values per partition of max8 / nc_find_index8 / nc_match_replace8


@api("nisa.bn_stats")
def bn_stats(data: Any, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> tensor:
    """Batch-norm statistics of each partition's row: (P, 6) fp32-math values."""
    x = _t(data, "data", "bn_stats")
    return single(
        "bn_stats",
        shape=(x.shape[0], BN_STATS_VALUES),
        dtype=_dtype(dtype, x.dtype),
        domain=tuple(x.shape),
        inputs={"data": x},
        out_axes=(0, None),
        mask=mask,
        label="nisa.bn_stats",
    )


@api("nisa.bn_aggr")
def bn_aggr(data: Any, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> tensor:
    """(mean, variance) per partition from concatenated bn_stats results: (P, 2)."""
    x = _t(data, "data", "bn_aggr")
    return single(
        "bn_aggr",
        shape=(x.shape[0], 2),
        dtype=_dtype(dtype, x.dtype),
        domain=tuple(x.shape),
        inputs={"data": x},
        out_axes=(0, None),
        mask=mask,
        label="nisa.bn_aggr",
    )


@api("nisa.affine_select")
def affine_select(
    pred: Any,
    on_true_tile: Any,
    on_false_value: Any,
    *,
    mask: Any = None,
    dtype: Any = None,
    **kwargs: Any,
) -> tensor:
    """pred ? on_true_tile : on_false_value, pred one affine comparison of the tile's indices
    (e.g. i_q >= i_k for a causal mask)."""
    x = _t(on_true_tile, "on_true_tile", "affine_select")
    if not isinstance(pred, Predicate) or len(pred.terms) != 1:
        raise ConstraintError(
            "nisa.affine_select: pred must be one affine comparison of "
            "nl.arange/nl.mgrid values (no & or |)"
        )
    expr, op = pred.terms[0]
    shape = tuple(x.shape)
    if x.space == "psum":
        # GpSimd reads SBUF only; AWS's flash attention (nki-samples attention.py) selects
        # from the matmul's PSUM tile, which the B1 compiler stages through SBUF: so here
        loc, loops = here()
        staged = _copy._tmp_sbuf(shape, x.dtype)
        _copy.move(staged, x, loc=loc, loops=loops, what="nisa.affine_select")
        x = staged
    _, coefs = expr.aligned(len(shape))
    pattern = [[c, n] for c, n in zip(coefs[1:], shape[1:], strict=True)]
    return single(
        "affine_select",
        shape=shape,
        dtype=_dtype(dtype, x.dtype),
        inputs={"on_true_tile": x},
        attrs={
            "pattern": pattern,
            "channel_multiplier": coefs[0],
            "on_false_value": on_false_value,
            "cmp_op": _CMP_NAMES[op],
            "offset": expr.const,
        },
        mask=mask,
        label="nisa.affine_select",
    )


@api("nisa.range_select")
def range_select(
    *,
    on_true_tile: Any,
    comp_op0: Any,
    comp_op1: Any,
    bound0: Any,
    bound1: Any,
    reduce_cmd: Any = reduce_cmd.idle,
    reduce_res: Any = None,
    reduce_op: Any = np.amax,
    range_start: Any = 0,
    on_false_value: Any = FP32_MIN,
    mask: Any = None,
    dtype: Any = None,
    **kwargs: Any,
) -> tensor:
    """Keep on_true_tile[p, j] where comp_op0(range_start + j, bound0[p]) and comp_op1(...,
    bound1[p]) hold, else on_false_value; optional max reduction into reduce_res."""
    x = _t(on_true_tile, "on_true_tile", "range_select")
    return single(
        "range_select",
        shape=tuple(x.shape),
        dtype=_dtype(dtype, x.dtype),
        inputs={
            "on_true_tile": x,
            "bound0": _t(bound0, "bound0", "range_select"),
            "bound1": _t(bound1, "bound1", "range_select"),
        },
        attrs={
            "comp_op0": _alu(comp_op0),
            "comp_op1": _alu(comp_op1),
            "reduce_cmd": reduce_cmd,
            "reduce_op": _alu(reduce_op),
            "range_start": range_start,
            "on_false_value": on_false_value,
        },
        extra_outputs=_side(reduce_res, "reduce_res", "range_select"),
        mask=mask,
        label="nisa.range_select",
    )


@api("nisa.select_reduce")
def select_reduce(
    *,
    dst: Any,
    predicate: Any,
    on_true: Any,
    on_false: Any,
    reduce_res: Any = None,
    reduce_cmd: Any = reduce_cmd.idle,
    reduce_op: Any = np.amax,
    reverse_pred: bool = False,
    mask: Any = None,
    dtype: Any = None,
    **kwargs: Any,
) -> Any:
    """dst = predicate ? on_true : on_false, optional max reduction; returns dst."""
    d = _t(dst, "dst", "select_reduce")
    loc, loops = here()
    outputs = {"dst": (d, None), **_side(reduce_res, "reduce_res", "select_reduce")}
    run(
        "select_reduce",
        None,
        domain=tuple(d.shape),
        outputs=outputs,
        inputs={
            "predicate": _t(predicate, "predicate", "select_reduce"),
            "on_true": _t(on_true, "on_true", "select_reduce"),
            "on_false": _tile_or_scalar(on_false, "on_false", "select_reduce"),
        },
        attrs={
            "reduce_cmd": reduce_cmd,
            "reduce_op": _alu(reduce_op),
            "reverse_pred": reverse_pred,
        },
        mask=as_mask(mask),
        loc=loc,
        loops=loops,
    )
    return dst


@api("nisa.nc_stream_shuffle")
def nc_stream_shuffle(
    src: Any, dst: Any, shuffle_mask: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any
) -> Any:
    """dst[q*32 + i] = src[q*32 + shuffle_mask[i]] in every 32-partition quadrant; returns dst."""
    _eager(
        "nc_stream_shuffle",
        None,
        dst,
        {"src": _t(src, "src", "nc_stream_shuffle")},
        {"shuffle_mask": tuple(int(m) for m in shuffle_mask)},
        mask,
    )
    return dst


@api("nisa.max8")
def max8(*, src: Any, mask: Any = None, dtype: Any = None, **kwargs: Any) -> tensor:
    """The 8 largest values of each partition, descending: (P, 8)."""
    x = _t(src, "src", "max8")
    return single(
        "max8",
        shape=(x.shape[0], TOP),
        dtype=_dtype(dtype, x.dtype),
        domain=tuple(x.shape),
        inputs={"src": x},
        out_axes=(0, None),
        mask=mask,
        label="nisa.max8",
    )


@api("nisa.nc_find_index8")
def nc_find_index8(
    *, data: Any, vals: Any, mask: Any = None, dtype: Any = None, **kwargs: Any
) -> tensor:
    """Index of the first occurrence of each of 8 values per partition: (P, 8) uint32."""
    x = _t(data, "data", "nc_find_index8")
    return single(
        "nc_find_index8",
        shape=(x.shape[0], TOP),
        dtype=_dtype(dtype, dt.uint32),
        domain=tuple(x.shape),
        inputs={"data": x, "vals": _t(vals, "vals", "nc_find_index8")},
        axes={"vals": (0, None)},
        out_axes=(0, None),
        mask=mask,
        label="nisa.nc_find_index8",
    )


@api("nisa.nc_match_replace8")
def nc_match_replace8(
    *,
    data: Any,
    vals: Any,
    imm: Any,
    dst_idx: Any = None,
    mask: Any = None,
    dtype: Any = None,
    **kwargs: Any,
) -> tensor:
    """data with the first occurrence of each of 8 values replaced by imm (indices optionally
    into dst_idx)."""
    x = _t(data, "data", "nc_match_replace8")
    return single(
        "nc_match_replace8",
        shape=tuple(x.shape),
        dtype=_dtype(dtype, x.dtype),
        inputs={"data": x, "vals": _t(vals, "vals", "nc_match_replace8")},
        axes={"vals": (0, None)},
        attrs={"imm": imm},
        extra_outputs=_side(dst_idx, "dst_idx", "nc_match_replace8"),
        mask=mask,
        label="nisa.nc_match_replace8",
    )


@api("nisa.tensor_partition_reduce")
def tensor_partition_reduce(
    op: Any, data: Any, *, mask: Any = None, dtype: Any = None, **kwargs: Any
) -> tensor:
    """Reduce across partitions (GpSimd): (1, ...) from (P, ...)."""
    x = _t(data, "data", "tensor_partition_reduce")
    return single(
        "tensor_partition_reduce",
        shape=(1, *x.shape[1:]),
        dtype=_dtype(dtype, x.dtype),
        domain=tuple(x.shape),
        inputs={"data": x},
        out_axes=(None, *range(1, x.ndim)),
        attrs={"op": _alu(op)},
        mask=mask,
        label="nisa.tensor_partition_reduce",
    )


@api("nisa.local_gather")
def local_gather(
    src_buffer: Any,
    index: Any,
    num_elem_per_idx: int = 1,
    num_valid_indices: Any = None,
    *,
    mask: Any = None,
    **kwargs: Any,
) -> tensor:
    """Per 16-partition GpSimd core, num_elem_per_idx elements at each index of src_buffer."""
    src = _t(src_buffer, "src_buffer", "local_gather")
    idx = _t(index, "index", "local_gather")
    per_core = 16 * M.free_elems(tuple(idx.shape))
    n = per_core if num_valid_indices is None else int(num_valid_indices)
    k = int(num_elem_per_idx)
    # Gathered element (index j of the core's column-order flattened slice, element e): the
    # docs' example annotates the result of a (128, 4) index with 4 elements per index as
    # tensor[128, 4, 16, 4]: index column, index partition within the core, element.
    shape = (src.shape[0], n // 16, 16, k) if n % 16 == 0 else (src.shape[0], n, k)
    return single(
        "local_gather",
        shape=shape,
        dtype=src.dtype,
        inputs={"src_buffer": src, "index": idx},
        axes={"src_buffer": (0,), "index": (0,)},
        attrs={"num_elem_per_idx": int(num_elem_per_idx), "num_valid_indices": num_valid_indices},
        mask=mask,
        label="nisa.local_gather",
    )


@api("nisa.sequence_bounds")
def sequence_bounds(*, segment_ids: Any, dtype: Any = None, **kwargs: Any) -> tensor:
    """Start and end (exclusive) of each element's segment: (1, 2, n)."""
    s = _t(segment_ids, "segment_ids", "sequence_bounds")
    n = M.free_elems(tuple(s.shape))
    return single(
        "sequence_bounds",
        shape=(1, 2, n),
        dtype=_dtype(dtype, s.dtype),
        domain=(1, 2, n),
        inputs={"segment_ids": s},
        axes={"segment_ids": (0,)},
        label="nisa.sequence_bounds",
    )


@api("nisa.dma_copy")
def dma_copy(
    *,
    dst: Any,
    src: Any,
    mask: Any = None,
    dst_rmw_op: Any = None,
    oob_mode: Any = oob_mode.error,
    dge_mode: Any = dge_mode.unknown,
    **kwargs: Any,
) -> Any:
    """dst = src through the DMA engines (dst_rmw_op=np.add: dst += src); returns dst."""
    for name, v in (("dst", dst), ("src", src)):
        if not isinstance(v, (tensor, IndirectAccess)):
            raise ConstraintError(f"nisa.dma_copy: {name} must be a tensor, got {type(v).__name__}")
    if isinstance(src, tensor):
        src._ready()
    src_view = _copy.fit(dst, src, "nisa.dma_copy") if isinstance(src, tensor) else src
    loc, loops = here()
    attrs = {"oob_mode": oob_mode, "dge_mode": getattr(dge_mode, "name", dge_mode)}
    if dst_rmw_op is not None:
        attrs["dst_rmw_op"] = _alu(dst_rmw_op)
    run(
        "dma_copy",
        None,
        domain=tuple(dst.shape),
        outputs={"dst": (dst, None)},
        inputs={"src": src_view},
        attrs=attrs,
        mask=as_mask(mask),
        loc=loc,
        loops=loops,
    )
    return dst


@api("nisa.dma_transpose")
def dma_transpose(
    src: Any,
    *,
    axes: Any = None,
    mask: Any = None,
    dtype: Any = None,
    dge_mode: Any = dge_mode.unknown,
    **kwargs: Any,
) -> tensor:
    """src transposed while moving into a new SBUF tile ((1, 0), (2, 1, 0), (3, 1, 2, 0))."""
    if not isinstance(src, (tensor, IndirectAccess)):
        raise ConstraintError("nisa.dma_transpose: src must be a tensor")
    perm = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}.get(len(src.shape))
    if perm is None:
        raise ConstraintError(
            f"nisa.dma_transpose: src has {len(src.shape)} dimensions; 2-, 3- or 4-D tensors"
        )
    shape = tuple(src.shape[a] for a in perm)
    inv = tuple(perm.index(k) for k in range(len(perm)))
    return single(
        "dma_transpose",
        shape=shape,
        dtype=src.dtype,
        inputs={"src": src},
        axes={"src": inv},
        attrs={
            "axes": None if axes is None else tuple(axes),
            "dge_mode": getattr(dge_mode, "name", dge_mode),
        },
        mask=input_space_mask(mask, tuple(src.shape), perm),
        label="nisa.dma_transpose",
    )


def builtin_custom_op(function_name: str, lib_file_name: str, *args: Any, **kwargs: Any) -> Any:
    """GpSimd custom kernels (an undocumented B1 API): not simulated."""
    raise UnsupportedError(
        f"nisa.builtin_custom_op({function_name!r}, {lib_file_name!r}): "
        "custom GpSimd libraries cannot be simulated",
        here()[0],
    )


builtin_custom_op.__trnsim_unsupported__ = True  # type: ignore[attr-defined]

__all__ = [
    "affine_select",
    "bn_aggr",
    "bn_stats",
    "builtin_custom_op",
    "dma_copy",
    "dma_transpose",
    "local_gather",
    "max8",
    "nc_find_index8",
    "nc_match_replace8",
    "nc_stream_shuffle",
    "range_select",
    "select_reduce",
    "sequence_bounds",
    "tensor_partition_reduce",
]
