"""Semantics of copies and fills (nki-api.md §7.3): tensor_copy (and the Beta-era
tensor_copy_dynamic_src/dst), tensor_copy_predicated, memset, iota.

Pure numpy; knows nothing about time. Same-dtype Vector/GpSimd copies are bit-exact; any
conversion goes through fp32 (nki-api.md §5A.2).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trnsim import dtypes as dt
from trnsim import wide_fp
from trnsim.memory import View
from trnsim.semantics import _vector_rules as R
from trnsim.semantics import semantics
from trnsim.spec import elems_of, fail, is_tensor, partitions_of

_M32 = np.int64(0xFFFFFFFF)


# ---------------------------------------------------------------- copies


def check_tensor_copy(
    *, chip: Any, engine: str, attrs: dict, dst: View, src: View, instr: str = "tensor_copy"
) -> None:
    if engine == "scalar" and chip.nc_version < 3:
        fail(
            instr,
            f"the Scalar engine of NeuronCore-v{chip.nc_version} has no tensor_copy",
            "use nisa.activation(op=nl.copy) or engine=nisa.vector / nisa.gpsimd",
        )
    if src.dtype != dst.dtype and (src.dtype.is_packed or dst.dtype.is_packed):
        fail(
            instr,
            f"cannot convert {src.dtype.name} to {dst.dtype.name}",
            "packed x4 types copy only to the same dtype (bit-exact)",
        )


def check_tensor_copy_dynamic_src(**kw: Any) -> None:
    check_tensor_copy(instr="tensor_copy_dynamic_src", **kw)


def check_tensor_copy_dynamic_dst(**kw: Any) -> None:
    check_tensor_copy(instr="tensor_copy_dynamic_dst", **kw)


@semantics("tensor_copy")
def tensor_copy(core: Any, *, engine: str, dst: View, src: View) -> None:
    """Vector/GpSimd copy bit-exactly when dtypes match; otherwise (and always on ScalarE)
    through fp32, so integers beyond 2^24 round (nki-api.md §5A.2)."""
    if src.dtype == dst.dtype and engine != "scalar" and not wide_fp.kept(src):
        # No copy of src first: numpy copies overlapping source memory itself when assigning.
        dst.write_raw(src.array().reshape(dst.shape))
    else:
        dst.write(src.read_f32().reshape(dst.shape))


# Removed from GA in 0.4.0 (deprecated 0.3.0); kept for the Beta-1/Beta-2 front ends. The
# dynamic offset is already resolved into the View by the time the instruction issues.
semantics("tensor_copy_dynamic_src")(tensor_copy)
semantics("tensor_copy_dynamic_dst")(tensor_copy)


PREDICATE_DTYPES = ("uint8", "uint16", "uint32")


def check_tensor_copy_predicated(
    *, chip: Any, engine: str, attrs: dict, dst: View, src: Any, predicate: View
) -> None:
    instr = "tensor_copy_predicated"
    R.check_same_layout(instr, "dst", dst, predicate=predicate, src=src)
    R.check_max_rank(instr, 4, dst=dst, predicate=predicate, src=src)
    if is_tensor(src):
        if src.dtype != dst.dtype:
            fail(
                instr,
                f"src has dtype {src.dtype.name} but dst has {dst.dtype.name}",
                "src and dst must share the same dtype",
            )
        R.check_psum_pair(instr, "src", src, "predicate", predicate)
        if attrs.get("reverse_pred"):
            fail(
                instr,
                "reverse_pred=True with a tensor src",
                "reverse_pred can only be set when src is a scalar (NKI 0.7.0)",
            )
    elif R.is_scalar(src):
        is_float = isinstance(src, (float, np.floating))
        if is_float and not dst.dtype.is_float:
            fail(
                instr,
                f"src={src!r} is a float but dst has dtype {dst.dtype.name}",
                "a float src needs a float dst; use an int for integer dsts",
            )
        if not is_float and dst.dtype.is_float:
            fail(
                instr,
                f"src={src!r} is an int but dst has dtype {dst.dtype.name}",
                "an int src needs an integer dst; use a float for float dsts",
            )
    else:
        fail(instr, f"src must be a tensor or a number, got {type(src).__name__}")


@semantics("tensor_copy_predicated")
def tensor_copy_predicated(
    core: Any, *, engine: str, dst: View, src: Any, predicate: View, reverse_pred: bool = False
) -> None:
    """dst[i] = src[i] (or the scalar src) where predicate[i] != 0 (== 0 with reverse_pred);
    elsewhere dst keeps its value. Same-dtype tensors copy bit-exactly."""
    mask = predicate.read().reshape(dst.shape) != 0
    if reverse_pred:
        mask = ~mask
    vals = src.read().reshape(dst.shape) if is_tensor(src) else dt.cast(np.asarray(src), dst.dtype)
    dst.write_raw(np.where(mask, vals, dst.read()))


# ---------------------------------------------------------------- memset, iota


def check_memset(*, chip: Any, engine: str, attrs: dict, dst: View, value: Any) -> None:
    instr = "memset"
    if not R.is_scalar(value):
        fail(instr, f"value must be a number, got {type(value).__name__} {value!r}")
    if dst.dtype.is_packed:
        if value != 0:
            fail(
                instr,
                f"dst has packed dtype {dst.dtype.name} and value={value!r}",
                "packed x4 types can only be set to 0",
            )
    elif (dst.dtype.kind in ("int", "uint", "bool") and isinstance(value, (float, np.floating))
          and value != 0):
        # 0.0 is accepted: it is the all-zero bits of every dtype, and nki-library's
        # cross_partition_copy zeroes uint32 tiles with memset(value=0.0) (moe_block_tkg).
        fail(
            instr,
            f"value={value!r} is a float but dst has dtype {dst.dtype.name}",
            "the value must match the dst dtype: pass an int for integer tensors",
        )


@semantics("memset")
def memset(core: Any, *, engine: str, dst: View, value: Any) -> None:
    """Fill dst with a compile-time constant (cast to dst's dtype)."""
    if dst.dtype.is_packed:
        dst.write_raw(np.zeros(dst.shape, dtype=dst.dtype.storage))
        return
    kind = np.int64 if isinstance(value, (int, np.integer)) else np.float64
    dst.write(np.full(dst.shape, value, dtype=kind))


def _iota_levels(pattern: Any) -> list[tuple[int, int]] | None:
    try:
        levels = [(int(step), int(num)) for step, num in pattern]
    except (TypeError, ValueError):
        return None
    ok = all(isinstance(x, (int, np.integer)) for pair in pattern for x in pair)
    return levels if ok else None


def check_iota(*, chip: Any, engine: str, attrs: dict, dst: View) -> None:
    instr = "iota"
    pattern = attrs.get("pattern")
    levels = _iota_levels(pattern)
    if levels is None or not 1 <= len(levels) <= 4:
        fail(
            instr,
            f"pattern={pattern!r} is not a list of 1 to 4 [step, num] integer pairs",
            "e.g. pattern=[[1, 512]] (outermost level first)",
        )
    if any(num < 1 for _, num in levels):
        fail(instr, f"pattern={pattern!r} has a level with num < 1", "every num must be >= 1")
    total = int(np.prod([num for _, num in levels]))
    if total != elems_of(dst):
        fail(
            instr,
            f"pattern={pattern!r} generates {total} elements per partition but dst "
            f"has {elems_of(dst)}",
            "the product of the nums must equal dst's free size",
        )
    for k in ("offset", "channel_multiplier"):
        v = attrs.get(k, 0)
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
            fail(instr, f"{k}={v!r} is not an integer", "iota computes in int32")


@semantics("iota")
def iota(
    core: Any, *, engine: str, dst: View, pattern: Any, offset: int = 0, channel_multiplier: int = 0
) -> None:
    """dst[p, i...] = offset + p*channel_multiplier + sum(step_k * i_k), in int32 (wrapping),
    then cast to dst's dtype; p counts dst's partitions from 0."""
    levels = _iota_levels(pattern) or []
    val = np.zeros([num for _, num in levels], dtype=np.int64)
    for k, (step, num) in enumerate(levels):
        shape = [1] * len(levels)
        shape[k] = num
        val = val + step * np.arange(num, dtype=np.int64).reshape(shape)
    parts = partitions_of(dst)
    full = (
        int(offset)
        + int(channel_multiplier) * np.arange(parts, dtype=np.int64)[:, None]
        + val.reshape(1, -1)
    )
    as_i32 = ((full & _M32).astype(np.uint32)).view(np.int32)
    dst.write(as_i32.reshape(dst.shape))
