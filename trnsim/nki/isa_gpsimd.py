"""nki.isa wrappers for GpSimd instructions: NKI's GA signature and docstring, one `_issue` call."""

from __future__ import annotations

from typing import Any

from trnsim.nki._isa_base import _issue
from trnsim.semantics._gpsimd_rules import PARTS_PER_CORE

__all__ = [
    "local_gather",
    "nc_n_gather",
    "nonzero_with_count",
    "sequence_bounds",
    "tensor_partition_reduce",
    "topk",
]


def tensor_partition_reduce(dst: Any, op: Any, data: Any, name: str | None = None) -> Any:
    """Reduce data across partitions (add, max, bitwise_or, bitwise_and, average) into dst."""
    return _issue("tensor_partition_reduce", None, name=name, dst=dst, op=op, data=data)


def local_gather(
    dst: Any,
    src_buffer: Any,
    index: Any,
    num_elem_per_idx: int = 1,
    num_valid_indices: int | None = None,
    name: str | None = None,
) -> Any:
    """Each GpSimd core gathers from its 16 partitions of src_buffer at uint16 free offsets."""
    if num_valid_indices is None and _per_core_indices(index) is not None:
        num_valid_indices = _per_core_indices(index)  # recorded for the timing model
    return _issue(
        "local_gather",
        None,
        name=name,
        dst=dst,
        src_buffer=src_buffer,
        index=index,
        num_elem_per_idx=num_elem_per_idx,
        num_valid_indices=num_valid_indices,
    )


def _per_core_indices(index: Any) -> int | None:
    """The documented default of num_valid_indices: all indices of a 16-partition slice."""
    shape = getattr(index, "shape", None)
    if not shape or len(shape) < 2 or shape[0] % PARTS_PER_CORE:
        return None  # left to the rules, which report the bad shape
    return PARTS_PER_CORE * int(index.size // shape[0])


def nc_n_gather(dst: Any, data: Any, indices: Any, name: str | None = None) -> Any:
    """Per partition, dst = data's flattened free elements taken at uint32 indices."""
    return _issue("nc_n_gather", None, name=name, dst=dst, data=data, indices=indices)


def sequence_bounds(dst: Any, segment_ids: Any, name: str | None = None) -> Any:
    """Start and end (exclusive) of each element's segment; padding (id 0) gets (n, -1)."""
    return _issue("sequence_bounds", None, name=name, dst=dst, segment_ids=segment_ids)


def nonzero_with_count(
    dst: Any, src: Any, index_offset: int = 0, padding_val: int = -1, name: str | None = None
) -> Any:
    """On partitions 0, 16, ..., 112: nonzero indices + offset, padding, then the count."""
    return _issue(
        "nonzero_with_count",
        None,
        name=name,
        dst=dst,
        src=src,
        index_offset=index_offset,
        padding_val=padding_val,
    )


def topk(val_dst: Any, idx_dst: Any, src: Any, n: int, name: str | None = None) -> Any:
    """K = val_dst's free size largest of an n-element 16-partition snake, ascending."""
    return _issue("topk", None, name=name, val_dst=val_dst, idx_dst=idx_dst, src=src, n=n)
