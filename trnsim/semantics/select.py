"""Semantics of the selection and statistics instructions (Vector family; affine_select on GpSimd).

Pure numpy on Views, fp32 engine math; knows nothing about time. The rules that the limit
vocabulary cannot say live in trnsim.semantics._select_rules.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trnsim import dtypes as dt
from trnsim.memory import View
from trnsim.semantics import _ops, semantics
from trnsim.semantics._select_rules import FP32_MIN, QUADRANT, SHUFFLE_KEEP, range_fill


def rows_f32(v: View) -> np.ndarray:
    """The engine's fp32 view of an operand, one row per partition (free dims flattened)."""
    return v.read_f32().reshape(v.shape[0], -1)


def rows_raw(v: View) -> np.ndarray:
    """The stored elements, one row per partition, bit for bit."""
    return v.read().reshape(v.shape[0], -1)


def all_ones(v: View) -> int:
    """The all-ones pattern of an unsigned index destination (0xFFFFFFFF / 0xFFFF)."""
    return int(np.iinfo(v.dtype.storage).max)


def affine_values(pattern: Any, offset: int, channel_multiplier: int, parts: int) -> np.ndarray:
    """iota's values: offset + p*channel_multiplier + sum(step*i) over the pattern, int32 math.

    Returns (parts, prod(nums)); the pattern's last level varies fastest, as dst's free
    elements do in row-major order.
    """
    vals = np.full((parts, 1), int(offset), dtype=np.int64)
    vals += np.arange(parts, dtype=np.int64)[:, None] * int(channel_multiplier)
    for step, num in pattern:
        term = np.arange(int(num), dtype=np.int64) * int(step)
        vals = (vals[:, :, None] + term[None, None, :]).reshape(parts, -1)
    return (vals + 2**31) % 2**32 - 2**31  # wraps like int32 hardware


def _compare(name: str, x: np.ndarray, y: Any) -> np.ndarray:
    return _ops.apply_binary(name, x, np.asarray(y)) != 0


def vector_max_reduce(
    core: Any, cmd: Any, lanes_view: View, rowmax: np.ndarray, reduce_res: View | None
) -> None:
    """Drive VectorE's per-lane fp32 accumulators (nki-api.md §8.3) with a max reduction.

    As _ops.accumulate (lanes = absolute partitions), except that `idle` with a reduce_res
    acts as `reset_reduce`: the documented numpy meaning of select_reduce / range_select is
    reduce_res = max of this instruction's result. The registers then go to reduce_res.
    """
    cmd = _ops.reduce_cmd_name(cmd)
    if cmd == "idle" and reduce_res is not None:
        cmd = "reset_reduce"
    acc = _ops.accumulate(core, "vector", _ops.lanes_of(lanes_view), cmd, "maximum", rowmax)
    if reduce_res is not None:
        reduce_res.write(acc.reshape(reduce_res.shape))


@semantics("affine_select")
def affine_select(
    core,
    *,
    engine: str,
    dst: View,
    on_true_tile: View,
    pattern,
    channel_multiplier,
    on_false_value,
    cmp_op="equal",
    offset=0,
) -> None:
    parts = dst.shape[0]
    vals = affine_values(pattern, offset, channel_multiplier, parts)
    pred = _compare(_ops.op_name(cmp_op, "cmp_op"), vals, 0)
    if on_true_tile.dtype == dst.dtype:
        # Same dtype: the selected elements move bit for bit; only on_false_value is converted.
        fill = dt.cast(np.float32(on_false_value), dst.dtype)
        out = np.where(pred, rows_raw(on_true_tile), fill)
        dst.write_raw(out.astype(dst.dtype.storage).reshape(dst.shape))
    else:  # differing dtypes go through fp32 (NKI GA docstring)
        out = np.where(pred, rows_f32(on_true_tile), np.float32(on_false_value))
        dst.write(out.reshape(dst.shape))


@semantics("range_select")
def range_select(
    core,
    *,
    engine: str,
    dst: View,
    on_true_tile: View,
    bound0: View,
    bound1: View,
    comp_op0,
    comp_op1,
    reduce_cmd="reset_reduce",
    reduce_res: View | None = None,
    reduce_op="maximum",
    range_start=0,
    on_false_value=FP32_MIN,
) -> None:
    x = rows_f32(on_true_tile)
    # range_start + j is formed and compared in fp32 (nki-api.md §5A.2).
    idx = (float(range_start) + np.arange(x.shape[1], dtype=np.float64)).astype(np.float32)
    keep = _compare(_ops.op_name(comp_op0), idx[None, :], rows_f32(bound0)) & _compare(
        _ops.op_name(comp_op1), idx[None, :], rows_f32(bound1)
    )
    out = np.where(keep, x, np.float32(range_fill(on_false_value)))
    # FP32_MIN overflows to -inf when dst is bf16/fp16/fp8 (RNE cast), as on hardware; the
    # reduction sees the fp32 values, so an fp32 reduce_res keeps FP32_MIN.
    dst.write(out.reshape(dst.shape))
    vector_max_reduce(core, reduce_cmd, on_true_tile, out.max(axis=1), reduce_res)


@semantics("select_reduce")
def select_reduce(
    core,
    *,
    engine: str,
    dst: View,
    predicate: View,
    on_true: View,
    on_false,
    reduce_res: View | None = None,
    reduce_cmd="idle",
    reduce_op="maximum",
    reverse_pred=False,
) -> None:
    pred = rows_raw(predicate) != 0
    if reverse_pred:
        pred = ~pred
    fill = rows_f32(on_false) if isinstance(on_false, View) else np.float32(on_false)
    out = np.where(pred, rows_f32(on_true), fill)
    dst.write(out.reshape(dst.shape))
    vector_max_reduce(core, reduce_cmd, on_true, out.max(axis=1), reduce_res)


def _moments(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(count, mean, sum of squared deviations) per row; an empty row gives (0, 0, 0)."""
    n = x.shape[1]
    if n == 0:
        zero = np.zeros(x.shape[0])
        return zero, zero, zero
    mean = x.mean(axis=1)
    return np.full(x.shape[0], float(n)), mean, ((x - mean[:, None]) ** 2).sum(axis=1)


@semantics("bn_stats")
def bn_stats(core, *, engine: str, dst: View, data: View) -> None:
    # Output per partition: count, mean, var*count of the even-indexed elements (0, 2, 4, ...
    # of the flattened free dims), then the same three for the odd-indexed ones (NKI GA
    # docstring of nki.isa.bn_stats). Statistics are computed in float64 from the fp32 inputs
    # and rounded once to dst (hardware: fp32; its accumulation order is not published).
    x = rows_f32(data).astype(np.float64)
    stats = (*_moments(x[:, 0::2]), *_moments(x[:, 1::2]))
    dst.write(np.stack(stats, axis=1).reshape(dst.shape))


@semantics("bn_aggr")
def bn_aggr(core, *, engine: str, dst: View, data: View) -> None:
    # Chan et al.'s parallel merge of (count, mean, M2) triples; variance = M2 / count
    # (population variance, as np.var). A total count of 0 gives NaN.
    t = rows_f32(data).astype(np.float64).reshape(data.shape[0], -1, 3)
    n, mu, m2 = t[..., 0], t[..., 1], t[..., 2]
    with np.errstate(all="ignore"):
        total = n.sum(axis=1)
        mean = (n * mu).sum(axis=1) / total
        var = (m2 + n * (mu - mean[:, None]) ** 2).sum(axis=1) / total
    dst.write(np.stack([mean, var], axis=1).reshape(dst.shape))


@semantics("nc_stream_shuffle")
def nc_stream_shuffle(core, *, engine: str, dst: View, src: View, shuffle_mask) -> None:
    src_rows = rows_raw(src)  # read first: dst may be src (in-place shuffle)
    out = rows_raw(dst)
    for i in range(dst.shape[0]):
        m = int(shuffle_mask[i % QUADRANT])
        if m != SHUFFLE_KEEP:
            out[i] = src_rows[i - i % QUADRANT + m]
    dst.write_raw(out.reshape(dst.shape))


@semantics("max8")
def max8(core, *, engine: str, dst: View, src: View) -> None:
    # Descending; np.sort puts NaN last, so reversed a NaN counts as the largest value.
    top = np.sort(rows_f32(src), axis=1)[:, ::-1][:, :8]
    dst.write(top.reshape(dst.shape))


def _first_unused(row: np.ndarray, value: np.float32, used: np.ndarray) -> int | None:
    hits = np.flatnonzero((row == value) & ~used)
    return int(hits[0]) if hits.size else None


@semantics("nc_find_index8")
def nc_find_index8(core, *, engine: str, dst: View, data: View, vals: View) -> None:
    # Values compare in fp32. A value found nowhere gives all ones (0.6.0 simulator/hardware);
    # duplicated values take successive occurrences, in slot order (0.6.0).
    d, v = rows_f32(data), rows_f32(vals)
    out = np.full(v.shape, all_ones(dst), dtype=np.int64)
    for p in range(d.shape[0]):
        used = np.zeros(d.shape[1], dtype=bool)
        for j in range(v.shape[1]):
            k = _first_unused(d[p], v[p, j], used)
            if k is not None:
                out[p, j] = k
                used[k] = True
    dst.write_raw(out.astype(dst.dtype.storage).reshape(dst.shape))


@semantics("nc_match_replace8")
def nc_match_replace8(
    core, *, engine: str, dst: View, data: View, vals: View, imm, dst_idx: View | None = None
) -> None:
    # Slots are processed 7..0, each taking the first not-yet-replaced occurrence, so of
    # duplicated values the highest slot gets the earliest match (nki-api.md §7.3). A value
    # found nowhere replaces nothing; its dst_idx slot gets all ones (as nc_find_index8).
    d, v = rows_f32(data), rows_f32(vals)
    replaced = np.zeros(d.shape, dtype=bool)
    idx = np.full(v.shape, all_ones(dst_idx) if dst_idx is not None else 0, dtype=np.int64)
    for p in range(d.shape[0]):
        for i in reversed(range(v.shape[1])):
            k = _first_unused(d[p], v[p, i], replaced[p])
            if k is not None:
                replaced[p, k] = True
                idx[p, i] = k
    dst.write(np.where(replaced, np.float32(imm), d).reshape(dst.shape))
    if dst_idx is not None:
        dst_idx.write_raw(idx.astype(dst_idx.dtype.storage).reshape(dst_idx.shape))
