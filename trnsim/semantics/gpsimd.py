"""Semantics of the GpSimd instructions (8 cores, each wired to 16 SBUF partitions).

Pure numpy on Views; knows nothing about time. Rules live in trnsim.semantics._gpsimd_rules.
"""

from __future__ import annotations

import numpy as np

from trnsim.errors import ConstraintError, OutOfBoundsError
from trnsim.memory import View
from trnsim.semantics import semantics
from trnsim.semantics._gpsimd_rules import PARTS_PER_CORE, partition_reduce_op, valid_indices
from trnsim.semantics.select import rows_f32, rows_raw

_INT_REDUCE = {
    "add": np.add,
    "maximum": np.maximum,
    "bitwise_or": np.bitwise_or,
    "bitwise_and": np.bitwise_and,
}


@semantics("tensor_partition_reduce")
def tensor_partition_reduce(core, *, engine: str, dst: View, op, data: View) -> None:
    name = partition_reduce_op(op)
    if name.startswith("bitwise"):  # raw integer bits
        dst.write(_INT_REDUCE[name].reduce(rows_raw(data), axis=0).reshape(dst.shape))
    elif data.dtype.is_int and dst.dtype.is_int and name != "average":
        # GpSimd has native integer ALUs (nki-api.md §5A.2): exact, then saturated into dst.
        acc = _INT_REDUCE[name].reduce(rows_raw(data).astype(np.int64), axis=0)
        dst.write(acc.reshape(dst.shape))
    else:
        # fp32 inputs, reduced in float64 and rounded once (GpSimd's summation order is not
        # published, so the correctly rounded result stands in for it).
        x = rows_f32(data).astype(np.float64)
        res = {"add": np.sum, "maximum": np.max, "average": np.mean}[name](x, axis=0)
        dst.write(res.reshape(dst.shape))


@semantics("local_gather")
def local_gather(
    core,
    *,
    engine: str,
    dst: View,
    src_buffer: View,
    index: View,
    num_elem_per_idx=1,
    num_valid_indices=None,
) -> None:
    # Core c owns partitions [16c, 16c+16): it flattens its slice of `index` partition-first
    # (numpy order='F'), keeps the first num_valid_indices, and for each index i copies
    # src_buffer[p, i : i + num_elem_per_idx] (flat free offset) for each of its partitions.
    # Indices are free-element offsets (the aws-neuron-sdk example passes index * k). No cast.
    k = int(num_elem_per_idx)
    n = valid_indices(index, num_valid_indices)
    src = rows_raw(src_buffer)
    idx = rows_raw(index).astype(np.int64)
    out = np.empty((src.shape[0], n * k), dtype=src.dtype)
    for c in range(src.shape[0] // PARTS_PER_CORE):
        rows = slice(c * PARTS_PER_CORE, (c + 1) * PARTS_PER_CORE)
        ids = idx[rows].flatten(order="F")[:n]
        bad = np.flatnonzero(ids + k > src.shape[1])
        if bad.size:
            raise OutOfBoundsError(
                f"local_gather: GpSimd core {c} index {int(ids[bad[0]])} (+{k} elements) reaches "
                f"past src_buffer's {src.shape[1]} elements per partition (undefined on hardware)"
            )
        cols = (ids[:, None] + np.arange(k)).reshape(-1)
        out[rows] = src[rows][:, cols]
    dst.write_raw(out.reshape(dst.shape))


@semantics("nc_n_gather")
def nc_n_gather(core, *, engine: str, dst: View, data: View, indices: View) -> None:
    src = rows_raw(data)
    idx = rows_raw(indices).astype(np.int64)
    bad = np.argwhere(idx >= src.shape[1])
    if bad.size:
        p, j = (int(x) for x in bad[0])
        raise OutOfBoundsError(
            f"nc_n_gather: indices[{p}, {j}] = {int(idx[p, j])} is outside [0, {src.shape[1]}) "
            "(data's elements per partition)"
        )
    dst.write_raw(np.take_along_axis(src, idx, axis=1).reshape(dst.shape))


@semantics("sequence_bounds")
def sequence_bounds(core, *, engine: str, dst: View, segment_ids: View) -> None:
    ids = segment_ids.read().reshape(-1)
    if (ids < 0).any() or not np.array_equal(ids, np.round(ids)):
        raise ConstraintError(
            f"sequence_bounds: segment ids must be non-negative integers, got "
            f"{ids[(ids < 0) | (ids != np.round(ids))][0].item()!r}"
        )
    n = ids.size
    pos = np.arange(n)
    first = np.ones(n, dtype=bool)
    first[1:] = ids[1:] != ids[:-1]
    last = np.ones(n, dtype=bool)
    last[:-1] = ids[:-1] != ids[1:]
    start = np.maximum.accumulate(np.where(first, pos, 0))
    end = np.minimum.accumulate(np.where(last, pos + 1, n)[::-1])[::-1]
    pad = ids == 0
    bounds = np.stack([np.where(pad, n, start), np.where(pad, -1, end)])
    dst.write(bounds.reshape(dst.shape))


@semantics("nonzero_with_count")
def nonzero_with_count(
    core, *, engine: str, dst: View, src: View, index_offset=0, padding_val=-1
) -> None:
    # Each GpSimd core reads and writes only its first partition (0, 16, ..., 112); other
    # partitions of dst keep their contents. int32 arithmetic (index + offset wraps).
    x = rows_raw(src)
    out = rows_raw(dst).astype(np.int64)
    for p in range(0, x.shape[0], PARTS_PER_CORE):
        nz = np.flatnonzero(x[p] != 0)
        out[p, :] = int(padding_val)
        out[p, : nz.size] = nz + int(index_offset)
        out[p, -1] = nz.size
    wrapped = (out + 2**31) % 2**32 - 2**31
    dst.write_raw(wrapped.astype(np.int32).reshape(dst.shape))


@semantics("topk")
def topk(core, *, engine: str, val_dst: View, idx_dst: View, src: View, n) -> None:
    # Each 16-partition group (one GpSimd core) holds one snake: element e at partition e % 16,
    # column e // 16. The K largest of its first n elements go out ascending with their snake
    # indices. Assumed (not documented): every partition of the group gets the same result;
    # ties prefer the lower index when selecting; NaN counts as the smallest value.
    x = rows_f32(src)
    k = val_dst.size // val_dst.shape[0]
    vals = np.empty((x.shape[0], k), dtype=np.float32)
    idxs = np.empty((x.shape[0], k), dtype=np.int64)
    for g in range(x.shape[0] // PARTS_PER_CORE):
        rows = slice(g * PARTS_PER_CORE, (g + 1) * PARTS_PER_CORE)
        snake = x[rows].flatten(order="F")[: int(n)]
        order = np.argsort(-snake, kind="stable")[:k][::-1]
        vals[rows] = snake[order]
        idxs[rows] = order
    val_dst.write(vals.reshape(val_dst.shape))
    idx_dst.write_raw(idxs.astype(np.uint32).reshape(idx_dst.shape))
