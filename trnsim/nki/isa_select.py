"""nki.isa wrappers for the selection/statistics instructions: NKI's GA signature, one `_issue`."""

from __future__ import annotations

from typing import Any

from trnsim.nki._isa_base import _issue, reduce_cmd
from trnsim.semantics._select_rules import FP32_MIN

__all__ = [
    "affine_select",
    "bn_aggr",
    "bn_stats",
    "max8",
    "nc_find_index8",
    "nc_match_replace8",
    "nc_stream_shuffle",
    "range_select",
    "select_reduce",
]


def affine_select(
    dst: Any,
    pattern: Any,
    channel_multiplier: int,
    on_true_tile: Any,
    on_false_value: float,
    cmp_op: Any = "equal",
    offset: int = 0,
    name: str | None = None,
) -> Any:
    """dst = cmp_op(iota-style affine value, 0) ? on_true_tile : on_false_value (GpSimd)."""
    return _issue(
        "affine_select",
        None,
        name=name,
        dst=dst,
        pattern=pattern,
        channel_multiplier=channel_multiplier,
        on_true_tile=on_true_tile,
        on_false_value=on_false_value,
        cmp_op=cmp_op,
        offset=offset,
    )


def range_select(
    dst: Any,
    on_true_tile: Any,
    comp_op0: Any,
    comp_op1: Any,
    bound0: Any,
    bound1: Any,
    reduce_cmd: Any = reduce_cmd.reset_reduce,
    reduce_res: Any = None,
    reduce_op: Any = "maximum",
    range_start: float = 0,
    on_false_value: float = FP32_MIN,
    name: str | None = None,
) -> Any:
    """Keep on_true_tile where range_start + j passes both bound comparisons; max-reduce rows."""
    return _issue(
        "range_select",
        None,
        name=name,
        dst=dst,
        on_true_tile=on_true_tile,
        comp_op0=comp_op0,
        comp_op1=comp_op1,
        bound0=bound0,
        bound1=bound1,
        reduce_cmd=reduce_cmd,
        reduce_res=reduce_res,
        reduce_op=reduce_op,
        range_start=range_start,
        on_false_value=on_false_value,
    )


def select_reduce(
    dst: Any,
    predicate: Any,
    on_true: Any,
    on_false: Any,
    reduce_res: Any = None,
    reduce_cmd: Any = reduce_cmd.idle,
    reduce_op: Any = "maximum",
    reverse_pred: bool = False,
    name: str | None = None,
) -> Any:
    """dst = where(predicate, on_true, on_false), with an optional max reduction (Vector)."""
    return _issue(
        "select_reduce",
        None,
        name=name,
        dst=dst,
        predicate=predicate,
        on_true=on_true,
        on_false=on_false,
        reduce_res=reduce_res,
        reduce_cmd=reduce_cmd,
        reduce_op=reduce_op,
        reverse_pred=reverse_pred,
    )


def bn_stats(dst: Any, data: Any, name: str | None = None) -> Any:
    """(count, mean, var*count) of even- then odd-indexed elements per partition (6 values)."""
    return _issue("bn_stats", None, name=name, dst=dst, data=data)


def bn_aggr(dst: Any, data: Any, name: str | None = None) -> Any:
    """(mean, variance) per partition from bn_stats triples."""
    return _issue("bn_aggr", None, name=name, dst=dst, data=data)


def nc_stream_shuffle(dst: Any, src: Any, shuffle_mask: Any, name: str | None = None) -> Any:
    """Permute partitions within each 32-partition quadrant; mask value 255 keeps dst."""
    return _issue("nc_stream_shuffle", None, name=name, dst=dst, src=src, shuffle_mask=shuffle_mask)


def max8(dst: Any, src: Any, name: str | None = None) -> Any:
    """The 8 largest values of each partition, descending."""
    return _issue("max8", None, name=name, dst=dst, src=src)


def nc_find_index8(dst: Any, data: Any, vals: Any, name: str | None = None) -> Any:
    """Index of the first occurrence of each of 8 values per partition."""
    return _issue("nc_find_index8", None, name=name, dst=dst, data=data, vals=vals)


def nc_match_replace8(
    dst: Any, data: Any, vals: Any, imm: float, dst_idx: Any = None, name: str | None = None
) -> Any:
    """Replace the first occurrence of each of 8 values per partition with imm."""
    return _issue(
        "nc_match_replace8",
        None,
        name=name,
        dst=dst,
        data=data,
        vals=vals,
        imm=imm,
        dst_idx=dst_idx,
    )
