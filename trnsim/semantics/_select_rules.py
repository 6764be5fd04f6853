"""Rules of the select/statistics instructions that the limit vocabulary cannot say.

Each check_<instr> is named by `check:` in isa/instructions/select.yaml and raises
ConstraintError through spec.fail. Knows shapes, dtypes and attributes; never values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from trnsim.errors import ConstraintError
from trnsim.semantics import _ops
from trnsim.spec import elems_of, fail, is_tensor, partitions_of, start_partition

FP32_MIN = float(np.finfo(np.float32).min)  # -3.4028235e38: range_select's on_false_value
QUADRANT = 32  # partitions per nc_stream_shuffle quadrant
SHUFFLE_KEEP = 255  # shuffle_mask value that leaves the destination partition unchanged
COMPARISONS = _ops.COMPARISONS
RANGE_COMPARISONS = ("equal", "less", "less_equal", "greater", "greater_equal")
INT32_RANGE = (-(2**31), 2**31 - 1)
MAX8_ELEMS = (8, 16384)  # elements per partition read by max8 / nc_find_index8
MATCH_MAX_ELEMS = 16384  # nc_match_replace8 data elements per partition


def is_number(x: Any) -> bool:
    """A compile-time real scalar (Python or numpy int/float; not bool, not a tensor)."""
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)


def is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def check_int(instr: str, what: str, x: Any, lo: int, hi: int) -> None:
    if not is_int(x) or not lo <= int(x) <= hi:
        fail(instr, f"{what}={x!r}", f"an integer in [{lo}, {hi}]")


def resolve_op(instr: str, op: Any, what: str, allowed: tuple[str, ...]) -> str:
    """The canonical ALU op name, or ConstraintError naming the instruction and the choices."""
    try:
        name = _ops.op_name(op, what)
    except ConstraintError:
        name = None
    if name not in allowed:
        shown = name if name is not None else getattr(op, "__name__", op)
        fail(instr, f"{what}={shown!r} is not supported", f"allowed: {', '.join(allowed)}")
    return name


def range_fill(value: Any) -> float:
    """range_select's on_false_value; None or ... (the 0.6.0 signature's default) is FP32_MIN."""
    return FP32_MIN if value is None or value is Ellipsis else float(value)


def _check_max_reduce(instr: str, attrs: Mapping[str, Any], reduce_res: Any) -> None:
    """Vector-accumulator max reduction shared by range_select and select_reduce (§8.3)."""
    resolve_op(instr, attrs.get("reduce_op", "maximum"), "reduce_op", ("maximum",))
    try:
        cmd = _ops.reduce_cmd_name(attrs.get("reduce_cmd"))
    except ConstraintError:
        cmd = repr(attrs.get("reduce_cmd"))
    allowed = tuple(c for c in _ops.REDUCE_CMDS if c != "load_reduce")
    if cmd not in allowed:
        fail(
            instr,
            f"reduce_cmd={cmd} is not supported",
            f"allowed: {', '.join(allowed)} (load_reduce needs a reduce_init this "
            f"instruction does not take)",
        )
    if reduce_res is not None and not reduce_res.dtype.is_float:
        fail(
            instr,
            f"operand 'reduce_res' has dtype {reduce_res.dtype.name}",
            "reduce_res must be a float dtype",
        )


def _check_nc_version(instr: str, chip: Any, minimum: int) -> None:
    if chip.nc_version < minimum:
        fail(
            instr,
            f"not available on {chip.name} (NeuronCore-v{chip.nc_version})",
            f"needs NeuronCore-v{minimum} or newer",
        )


def _check_elems(instr: str, name: str, t: Any, lo: int, hi: int | None = None) -> None:
    n = elems_of(t)
    if hi is None and n != lo:
        fail(instr, f"operand '{name}' has {n} elements per partition", f"it must have {lo}")
    if hi is not None and not lo <= n <= hi:
        fail(
            instr,
            f"operand '{name}' has {n} elements per partition",
            f"between {lo} and {hi} allowed",
        )


def check_affine_select(
    *, chip: Any, engine: str, attrs: Mapping[str, Any], dst: Any, on_true_tile: Any
) -> None:
    instr = "affine_select"
    pattern = attrs.get("pattern")
    ok = (
        isinstance(pattern, (list, tuple))
        and 1 <= len(pattern) <= 4
        and all(
            isinstance(lv, (list, tuple))
            and len(lv) == 2
            and is_int(lv[0])
            and is_int(lv[1])
            and int(lv[1]) >= 1
            for lv in pattern
        )
    )
    if not ok:
        fail(
            instr,
            f"pattern={pattern!r}",
            "a list of 1 to 4 [step, num] pairs of integers with num >= 1",
        )
    total = int(np.prod([int(num) for _, num in pattern]))
    if total != elems_of(dst):
        fail(
            instr,
            f"pattern covers {total} elements but dst has {elems_of(dst)} per partition",
            "the product of the pattern's nums must equal dst's elements per partition",
        )
    check_int(instr, "channel_multiplier", attrs.get("channel_multiplier"), *INT32_RANGE)
    check_int(instr, "offset", attrs.get("offset", 0), *INT32_RANGE)
    resolve_op(instr, attrs.get("cmp_op", "equal"), "cmp_op", COMPARISONS)
    if not is_number(attrs.get("on_false_value")):
        fail(
            instr,
            f"on_false_value={attrs.get('on_false_value')!r}",
            "on_false_value must be a float32 compile-time scalar",
        )


def check_range_select(
    *,
    chip: Any,
    engine: str,
    attrs: Mapping[str, Any],
    dst: Any,
    on_true_tile: Any,
    bound0: Any,
    bound1: Any,
    reduce_res: Any = None,
) -> None:
    instr = "range_select"
    _check_nc_version(instr, chip, 3)
    resolve_op(instr, attrs.get("comp_op0"), "comp_op0", RANGE_COMPARISONS)
    resolve_op(instr, attrs.get("comp_op1"), "comp_op1", RANGE_COMPARISONS)
    if not on_true_tile.dtype.is_float:
        fail(
            instr,
            f"operand 'on_true_tile' has dtype {on_true_tile.dtype.name}",
            "on_true_tile must be a float dtype",
        )
    _check_max_reduce(instr, attrs, reduce_res)
    if not is_number(attrs.get("range_start", 0)):
        fail(instr, f"range_start={attrs.get('range_start')!r}", "a compile-time number")
    fill = attrs.get("on_false_value", FP32_MIN)
    if not (
        fill is None
        or fill is Ellipsis
        or (is_number(fill) and np.float32(fill) == np.float32(FP32_MIN))
    ):
        fail(
            instr, f"on_false_value={fill!r}", f"the hardware only supports FP32_MIN ({FP32_MIN!r})"
        )


def check_select_reduce(
    *,
    chip: Any,
    engine: str,
    attrs: Mapping[str, Any],
    dst: Any,
    predicate: Any,
    on_true: Any,
    on_false: Any,
    reduce_res: Any = None,
) -> None:
    instr = "select_reduce"
    if on_true.buffer.space == "psum" and predicate.buffer.space == "psum":
        fail(
            instr,
            "operands on_true and predicate are both in psum",
            "at most one of them may be in psum",
        )
    if not is_tensor(on_false) and not is_number(on_false):
        fail(instr, f"on_false={on_false!r}", "a float32 scalar or a (P, 1) tensor")
    _check_max_reduce(instr, attrs, reduce_res)


def check_bn_stats(
    *, chip: Any, engine: str, attrs: Mapping[str, Any], dst: Any, data: Any
) -> None:
    _check_elems("bn_stats", "dst", dst, 6)


def check_bn_aggr(*, chip: Any, engine: str, attrs: Mapping[str, Any], dst: Any, data: Any) -> None:
    n = elems_of(data)
    if n == 0 or n % 3:
        fail(
            "bn_aggr",
            f"operand 'data' has {n} elements per partition",
            "a positive multiple of 3: (count, mean, var*count) triples from bn_stats",
        )
    _check_elems("bn_aggr", "dst", dst, 2)


def check_nc_stream_shuffle(
    *, chip: Any, engine: str, attrs: Mapping[str, Any], dst: Any, src: Any
) -> None:
    instr = "nc_stream_shuffle"
    mask = attrs.get("shuffle_mask")
    if (
        not isinstance(mask, (list, tuple))
        or len(mask) != QUADRANT
        or not all(is_int(m) and (0 <= int(m) < QUADRANT or int(m) == SHUFFLE_KEEP) for m in mask)
    ):
        fail(
            instr,
            f"shuffle_mask={mask!r}",
            f"a list of {QUADRANT} integers, each in [0, 31] or 255 (keep)",
        )
    ps, pd = partitions_of(src), partitions_of(dst)
    active = -(-max(ps, pd) // QUADRANT) * QUADRANT
    allowed = (0,) if active > 64 else (0, 64) if active > QUADRANT else (0, 32, 64, 96)
    for name, t in (("src", src), ("dst", dst)):
        if start_partition(t) not in allowed:
            fail(
                instr,
                f"operand '{name}' starts at partition {start_partition(t)} with "
                f"{active} active partitions (max(P_src={ps}, P_dst={pd}) rounded up to 32)",
                f"it must start at partition {' or '.join(map(str, allowed))}",
            )
    for i in range(pd):
        m = int(mask[i % QUADRANT])
        if m != SHUFFLE_KEEP and i - i % QUADRANT + m >= ps:
            fail(
                instr,
                f"shuffle_mask[{i % QUADRANT}]={m} makes dst partition {i} read src "
                f"partition {i - i % QUADRANT + m}, but src has {ps} partitions",
                "every source partition must exist (or use 255 to keep dst)",
            )


def check_max8(*, chip: Any, engine: str, attrs: Mapping[str, Any], dst: Any, src: Any) -> None:
    _check_elems("max8", "src", src, *MAX8_ELEMS)
    _check_elems("max8", "dst", dst, 8)


def check_nc_find_index8(
    *, chip: Any, engine: str, attrs: Mapping[str, Any], dst: Any, data: Any, vals: Any
) -> None:
    _check_elems("nc_find_index8", "data", data, *MAX8_ELEMS)
    _check_elems("nc_find_index8", "vals", vals, 8)
    _check_elems("nc_find_index8", "dst", dst, 8)


def check_nc_match_replace8(
    *,
    chip: Any,
    engine: str,
    attrs: Mapping[str, Any],
    dst: Any,
    data: Any,
    vals: Any,
    dst_idx: Any = None,
) -> None:
    instr = "nc_match_replace8"
    _check_elems(instr, "data", data, 1, MATCH_MAX_ELEMS)
    _check_elems(instr, "vals", vals, 8)
    if dst_idx is not None:
        _check_elems(instr, "dst_idx", dst_idx, 8)
    if not is_number(attrs.get("imm")):
        fail(instr, f"imm={attrs.get('imm')!r}", "imm must be a float32 compile-time scalar")
