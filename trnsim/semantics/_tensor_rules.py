"""Shared helpers of the Tensor Engine instructions (nc_matmul, nc_matmul_mx, nc_transpose):
PSUM result writes, tiling rules, warnings. Knows chips, dtypes and views; nothing about time.

PSUM accumulation groups (nc_matmul / nc_matmul_mx `accumulate`). `core.psum_writer`
(semantics/psum_writers.py) holds, for every fp32 word of PSUM, the `psum_tag` of the tensor
(allocation) that last wrote it, 0 where nothing wrote since the allocation that covers it;
any write by any engine sets it
(core.py marks written PSUM words after every instruction), and a fresh PSUM allocation clears
it. That is the GA docstring's rule, accumulate=None "auto-detects based on whether this PSUM
location was previously written", where "previously written" is by the same tensor: tensors
placed at one address (address=, e.g. nki-library's per-group PSUM tiles sharing a bank) are
separate accumulation groups, so the first matmul into each starts its own. Per element:
accumulate=False overwrites, True adds (and warns with SimulationWarning where the word was
never written, as AWS's 0.5 simulator warns; the sum then includes the NaN poison of fresh
PSUM), None adds where its dst tensor wrote and overwrites elsewhere. Limitation: the state
is per 4-byte word, so two bf16 elements sharing a word share it (a matmul writing only one of
them opens the group for both).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from trnsim.errors import ConstraintError, SimulationWarning
from trnsim.memory import View
from trnsim.program import capture_location
from trnsim.spec import elems_of, fail, partitions_of, start_partition

PE_ROWS = 128  # systolic array rows (contraction) and columns (stationary free -> dst partitions)

_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32}


warnings_issued = 0  # warn() calls so far: a check that warned is not remembered as passed


def warn(message: str) -> None:
    """A SimulationWarning attributed to the user's kernel line."""
    global warnings_issued
    warnings_issued += 1
    loc = capture_location()
    if loc is None:
        warnings.warn(message, SimulationWarning, stacklevel=3)
    else:
        warnings.warn_explicit(message, SimulationWarning, loc.filename, loc.lineno)


def marks_psum(fn: Any) -> Any:
    """Mark a semantics function that sets core.psum_writer for every PSUM word it
    writes (the matmul family does so as it accumulates), so NeuronCore.issue need not."""
    fn.marks_psum = True
    return fn


def psum_words(view: View) -> tuple[Any, Any]:
    """(partition, fp32 word) of every element of an on-chip view, indexing
    core.psum_writer into an array shaped like the view."""
    lay, buf = view.layout, view.buffer
    per_partition = buf.elems_per_partition(lay.dtype)
    shape, strides = lay.shape, lay.strides
    if per_partition and shape and (shape[0] == 1 or strides[0] == per_partition):
        # One partition per row of dim 0 (the common case): the rows are a slice, and only
        # the free dims need an index array (or a slice, when they are one contiguous run).
        p_off, f_off = divmod(lay.offset, per_partition)
        rows = slice(buf.partition_start + p_off, buf.partition_start + p_off + shape[0])
        isz = lay.dtype.itemsize
        if isz == 4 and len(shape) == 2 and (shape[1] == 1 or strides[1] == 1):
            if f_off + shape[1] <= per_partition:
                w0 = buf.byte_start // 4 + f_off
                return rows, slice(w0, w0 + shape[1])
        else:
            free = np.full(shape[1:], f_off, dtype=np.int64)
            for d, (n, s) in enumerate(zip(shape[1:], strides[1:], strict=True)):
                axis = [1] * (len(shape) - 1)
                axis[d] = n
                free = free + (np.arange(n, dtype=np.int64) * s).reshape(axis)
            if free.size == 0 or (free.min() >= 0 and free.max() < per_partition):
                return rows, (buf.byte_start + free * isz) // 4
    pos = np.full(shape, lay.offset, dtype=np.int64)
    for d, (n, s) in enumerate(zip(shape, strides, strict=True)):
        axis = [1] * len(shape)
        axis[d] = n
        pos = pos + (np.arange(n, dtype=np.int64) * s).reshape(axis)
    part, elem = np.divmod(pos, per_partition) if per_partition else (pos * 0, pos)
    return buf.partition_start + part, (buf.byte_start + elem * lay.dtype.itemsize) // 4


def write_psum_result(core, instr: str, dst: View, result: np.ndarray, accumulate) -> None:
    """Store a matmul result (shaped like dst) with the per-element accumulate rule.

    `result` is fp32, or float64 to be rounded to fp32 here, once: an fp32 PSUM dst then takes
    the rounding and the add in one pass over the data (numpy casts the float64 operand to fp32
    before the fp32 add, in cache-sized chunks), which is the result's largest cost after the
    product itself."""
    rows, words = psum_words(dst)
    writers = core.psum_writer
    known = writers.uniform_tag(rows, words)
    if known is not None and (known == dst.buffer.psum_tag if accumulate is None
                              else bool(accumulate) and known != 0):
        add = np.bool_(True)  # every word is this tensor's (accumulate=True: was written)
    else:
        add = _accumulate_mask(core, instr, dst, rows, words, accumulate)
    every = bool(add.all())
    some = every or bool(add.any())
    with np.errstate(all="ignore"):
        if _plain_fp32(dst) and every:
            psum = dst.array()
            np.add(psum, result, out=psum, dtype=np.float32, casting="unsafe")
            result = None
        elif _plain_fp32(dst) and not some:
            dst.will_overwrite()
            np.copyto(dst.array(), result, casting="same_kind")  # one rounding to fp32
            result = None
        else:
            result = np.asarray(result, dtype=np.float32)  # the one rounding to fp32
            if every:
                result = dst.read_f32() + result  # fp32 PSUM add
            elif some:
                result = np.where(add, dst.read_f32() + result, result)
    if result is not None:
        dst.write(result)
    writers.set_rect(rows, words, dst.buffer.psum_tag)


def _accumulate_mask(core, instr: str, dst: View, rows, words, accumulate) -> np.ndarray:
    """Where the result adds onto PSUM (True) rather than overwrites it: a bool array shaped
    like dst, or one numpy bool for every element."""
    if accumulate is None:
        return core.psum_writer[rows, words] == dst.buffer.psum_tag
    if accumulate:
        written = core.psum_writer[rows, words] != 0
        if not written.all():
            warn(
                f"{instr}: accumulate=True onto {int((~written).sum())} PSUM element(s) of "
                f"'{dst.name}' that nothing wrote since allocation; the sum includes their "
                "undefined contents (use accumulate=False or None for the first matmul)"
            )
        return np.bool_(True)
    return np.bool_(False)


def _plain_fp32(dst: View) -> bool:
    """An fp32 dst at a static address: numpy can round and add into its memory directly."""
    return dst.dtype.name == "float32" and getattr(dst, "dynamic", None) is None


def write_bits(dst: View, bits: np.ndarray) -> None:
    """Store values bit for bit (any storage dtype of dst's element size)."""
    isz = dst.dtype.itemsize
    dst.array().view(_UINT[isz])[...] = (
        np.ascontiguousarray(bits).view(_UINT[isz]).reshape(dst.shape)
    )


def _int(v, instr: str, what: str) -> int:
    try:
        return int(v)
    except (TypeError, ValueError) as e:
        raise ConstraintError(f"{instr}: {what} must be integers, got {v!r}") from e


def check_tiling(
    instr: str, chip, attrs, k: int, m: int, dst: View, row_only: bool = False
) -> tuple[int, int]:
    """tile_position / tile_size rules (nki-api.md §7.1). Returns (row_size, column_size)."""
    pos = tuple(attrs.get("tile_position") or ())
    size = tuple(attrs.get("tile_size") or ())
    if bool(pos) != bool(size):
        fail(
            instr,
            f"tile_position={pos} and tile_size={size}",
            "set both tile_position and tile_size, or neither",
        )
    if not size:
        return PE_ROWS, PE_ROWS
    if len(pos) != 2 or len(size) != 2:
        fail(instr, f"tile_position={pos}, tile_size={size}", "both are (row, column) pairs")
    (r0, c0), (rs, cs) = (
        (_int(v, instr, "tile_position values") for v in pos),
        (_int(v, instr, "tile_size values") for v in size),
    )
    allowed = tuple(chip.tensor.tile_sizes)
    for what, v in (("row size", rs), ("column size", cs)):
        if v not in allowed:
            fail(
                instr,
                f"tile_size={size}: {what} {v} is not a PE tile size",
                f"allowed on {chip.name}: {', '.join(map(str, allowed))}",
            )
    if row_only and (cs != PE_ROWS or c0 != 0):
        fail(
            instr,
            f"tile_size={size}, tile_position={pos}",
            "only row tiling: column size must be 128 and the start column 0",
        )
    for what, p, s in (("row", r0, rs), ("column", c0, cs)):
        if p < 0 or p % s or p + s > PE_ROWS:
            fail(
                instr,
                f"tile_position {what} {p} with {what} size {s}",
                f"the start {what} must be a multiple of the {what} size and the tile must end "
                f"by {PE_ROWS}",
            )
    if k > rs:
        fail(
            instr,
            f"the contraction spans {k} partitions but the row tile has {rs} rows",
            f"at most {rs} (tile_size row size)",
        )
    if m > cs:
        fail(
            instr,
            f"operand 'stationary' has free size {m} but the column tile has {cs} columns",
            f"at most {cs} (tile_size column size)",
        )
    if cs < PE_ROWS and start_partition(dst) != c0:
        fail(
            instr,
            f"dst starts at PSUM partition {start_partition(dst)}; with tile_position "
            f"column {c0} the results land in PSUM partitions [{c0}, {c0 + m})",
            f"index dst from partition {c0}",
        )
    return rs, cs


def check_dst_shape(instr: str, dst: View, m: int, n: int) -> None:
    if partitions_of(dst) != m or elems_of(dst) != n:
        fail(
            instr,
            f"dst has {partitions_of(dst)} partitions x {elems_of(dst)} elements "
            f"(shape {list(dst.shape)})",
            f"the result is [{m}, {n}]",
        )


def check_psum_banks(instr: str, chip, dst: View) -> None:
    """Before NC-v4 a matmul writes into one 2 KiB PSUM bank (nki-api.md §3.4 TC2)."""
    if chip.nc_version >= 4:
        return
    bank = chip.tile_size["psum_bank_fmax_bytes"]
    r = dst.region()
    if r.byte_end > r.byte_start and r.byte_start // bank != (r.byte_end - 1) // bank:
        fail(
            instr,
            f"dst spans PSUM bytes [{r.byte_start}, {r.byte_end}) of each partition, "
            f"crossing a {bank}-byte bank boundary",
            f"on {chip.name} a matmul result must fit in one PSUM bank "
            f"({chip.tile_size['psum_bank_fmax']} fp32)",
        )


def perf_mode_name(v) -> str:
    v = getattr(v, "value", v)
    return "none" if v is None else str(v)
