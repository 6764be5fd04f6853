"""Rules of the GpSimd instructions that the limit vocabulary cannot say.

Each check_<instr> is named by `check:` in isa/instructions/gpsimd.yaml and raises
ConstraintError through spec.fail. Knows shapes, dtypes and attributes; never values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trnsim.errors import ConstraintError
from trnsim.semantics import _ops
from trnsim.semantics._select_rules import INT32_RANGE, check_int
from trnsim.spec import elems_of, fail, partitions_of

PARTS_PER_CORE = 16  # SBUF partitions wired to each of the 8 GpSimd cores
MAX_INDICES_PER_CORE = 4096  # local_gather
PARTITION_REDUCE_OPS = ("add", "maximum", "bitwise_or", "bitwise_and", "average")
TOPK_N = (8, 65535)  # 8 <= n < 65536
TOPK_K = (1, 32767)  # 1 <= K < 32768


def partition_reduce_op(op: Any) -> str:
    """tensor_partition_reduce's op by name; `average` (nl.average, GA) is not an ALU table op."""
    raw = (
        op
        if isinstance(op, str)
        else getattr(op, "nki_name", None) or getattr(op, "__name__", None)
    )
    if raw in ("average", "mean"):
        return "average"
    try:
        name = _ops.op_name(op, "op")
    except ConstraintError:
        name = None
    if name not in PARTITION_REDUCE_OPS:
        fail(
            "tensor_partition_reduce",
            f"op={raw if name is None else name!r} is not supported",
            f"allowed: {', '.join(PARTITION_REDUCE_OPS)}",
        )
    return name


def valid_indices(index: Any, num_valid_indices: Any) -> int:
    """local_gather's indices per core: the given count, else all of a 16-partition slice."""
    if num_valid_indices is None:
        return PARTS_PER_CORE * elems_of(index)
    return int(num_valid_indices)


def _multiple_of_16(instr: str, name: str, t: Any) -> None:
    if partitions_of(t) % PARTS_PER_CORE:
        fail(
            instr,
            f"operand '{name}' has {partitions_of(t)} partitions",
            f"a multiple of {PARTS_PER_CORE} (partitions per GpSimd core)",
        )


def check_tensor_partition_reduce(
    *, chip: Any, engine: str, attrs: Mapping[str, Any], dst: Any, data: Any
) -> None:
    instr = "tensor_partition_reduce"
    op = partition_reduce_op(attrs.get("op"))
    if partitions_of(dst) != 1:
        fail(
            instr,
            f"operand 'dst' has {partitions_of(dst)} partitions",
            "the reduction across partitions writes 1 partition",
        )
    if _ops.is_bitvec(op):
        for name, t in (("dst", dst), ("data", data)):
            if not t.dtype.is_int:
                fail(
                    instr,
                    f"op={op} needs integer operands; '{name}' has dtype {t.dtype.name}",
                    "bitwise ops work on integer bits",
                )


def check_local_gather(
    *, chip: Any, engine: str, attrs: Mapping[str, Any], dst: Any, src_buffer: Any, index: Any
) -> None:
    instr = "local_gather"
    _multiple_of_16(instr, "src_buffer", src_buffer)
    per_core = PARTS_PER_CORE * elems_of(index)
    nv = attrs.get("num_valid_indices")
    if nv is not None:
        check_int(instr, "num_valid_indices", nv, 1, per_core)
    n = valid_indices(index, nv)
    if n > MAX_INDICES_PER_CORE:
        fail(
            instr,
            f"{n} indices per GpSimd core",
            f"at most {MAX_INDICES_PER_CORE} (set num_valid_indices or use a smaller index)",
        )
    k = int(attrs.get("num_elem_per_idx", 1))
    if elems_of(dst) != n * k:
        fail(
            instr,
            f"dst has {elems_of(dst)} elements per partition but {n} indices x "
            f"{k} elements per index are gathered",
            "dst elements per partition must equal num_valid_indices * num_elem_per_idx",
        )


def check_sequence_bounds(
    *, chip: Any, engine: str, attrs: Mapping[str, Any], dst: Any, segment_ids: Any
) -> None:
    instr = "sequence_bounds"
    for name, t in (("segment_ids", segment_ids), ("dst", dst)):
        if partitions_of(t) != 1:
            fail(
                instr,
                f"operand '{name}' has {partitions_of(t)} partitions",
                "the partition dimension must be 1",
            )
    n = elems_of(segment_ids)
    if elems_of(dst) != 2 * n:
        fail(
            instr,
            f"dst has {elems_of(dst)} elements for {n} segment ids",
            f"dst must hold a start and an end per id: shape (1, 2, {n})",
        )


def check_nonzero_with_count(
    *, chip: Any, engine: str, attrs: Mapping[str, Any], dst: Any, src: Any
) -> None:
    instr = "nonzero_with_count"
    if chip.nc_version < 3:
        fail(
            instr,
            f"not available on {chip.name} (NeuronCore-v{chip.nc_version})",
            "needs NeuronCore-v3 or newer",
        )
    if elems_of(dst) != elems_of(src) + 1:
        fail(
            instr,
            f"dst has {elems_of(dst)} elements per partition, src {elems_of(src)}",
            "dst must have exactly one more (the count)",
        )
    check_int(instr, "index_offset", attrs.get("index_offset", 0), *INT32_RANGE)
    check_int(instr, "padding_val", attrs.get("padding_val", -1), *INT32_RANGE)


def check_topk(
    *, chip: Any, engine: str, attrs: Mapping[str, Any], val_dst: Any, idx_dst: Any, src: Any
) -> None:
    instr = "topk"
    _multiple_of_16(instr, "src", src)
    n = attrs.get("n")
    check_int(instr, "n", n, *TOPK_N)
    k = elems_of(val_dst)
    if not TOPK_K[0] <= k <= TOPK_K[1] or k > int(n):
        fail(
            instr,
            f"K = {k} (val_dst's elements per partition) with n = {n}",
            f"{TOPK_K[0]} <= K <= {TOPK_K[1]} and K <= n",
        )
    cols = -(-int(n) // PARTS_PER_CORE)
    if elems_of(src) < cols:
        fail(
            instr, f"src has {elems_of(src)} columns for n = {n}", f"at least ceil(n / 16) = {cols}"
        )
