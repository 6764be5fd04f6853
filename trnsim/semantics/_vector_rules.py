"""Shared rule helpers of the Vector-engine instruction checks (nki-api.md §7.3, §8.1).

Each helper raises ConstraintError("<instr>: <what>; <allowed>"); `_issue` adds the user's
line. Knows chips, dtypes and views; knows nothing about time.
"""

from __future__ import annotations

from numbers import Real
from typing import Any

import numpy as np

from trnsim.errors import ConstraintError
from trnsim.semantics import _ops
from trnsim.spec import elems_of, fail, is_tensor, partitions_of

# ops that exist only on NeuronCore-v4 (nki-api.md §8.1: abs_max/abs_min 0.4.0 v4)
V4_OPS = ("abs_max", "abs_min")
# unary ops tensor_scalar accepts with operand None/0 (square/relu: 0.4.0, NC-v4)
TS_UNARY = ("abs", "square", "relu", "rsqrt", "reciprocal", "invert", "logical_not")
TS_UNARY_V4 = ("square", "relu")
REDUCE_CMD_DOC = "nisa.reduce_cmd.idle, reset, reduce, reset_reduce or load_reduce"


def resolve_op(instr: str, op: Any, what: str = "op", *, optional: bool = False) -> str | None:
    """Canonical op name, with the instruction in any error."""
    if op is None or op is Ellipsis:
        if optional:
            return None
        fail(instr, f"{what} is required", "pass an ALU operator such as nl.add")
    try:
        return _ops.op_name(op, what)
    except ConstraintError as e:
        raise ConstraintError(f"{instr}: {e.message}") from None


def reduce_cmd(instr: str, cmd: Any) -> str:
    try:
        return _ops.reduce_cmd_name(cmd)
    except ConstraintError as e:
        raise ConstraintError(f"{instr}: {e.message}") from None


def need_gen(instr: str, chip: Any, gen: int, what: str) -> None:
    if chip.nc_version < gen:
        fail(
            instr,
            f"{what} needs NeuronCore-v{gen} or newer; {chip.name} is "
            f"NeuronCore-v{chip.nc_version}",
            f"run on a gen{gen}+ chip (trn3 for v4)",
        )


def check_op_gen(instr: str, chip: Any, name: str | None, what: str = "op") -> None:
    if name in V4_OPS:
        need_gen(instr, chip, 4, f"{what}={name}")


def is_int(t: Any) -> bool:
    return t.dtype.kind in ("int", "uint", "bool")


def need_int_dtypes(instr: str, opname: str, **tensors: Any) -> None:
    """Bitvec ops need integer dtypes on every tensor operand (nki-api.md §8.1)."""
    for n, t in tensors.items():
        if t is not None and is_tensor(t) and not is_int(t):
            fail(
                instr,
                f"bitvec op {opname} needs integer dtypes, but '{n}' is {t.dtype.name}",
                "use an integer tensor (int8/16/32, uint8/16/32) or an arithmetic op",
            )


def is_scalar(x: Any) -> bool:
    return isinstance(x, (Real, np.number)) and not is_tensor(x)


def check_per_partition(instr: str, name: str, x: Any, data: Any, *, fp32: bool = False) -> None:
    """x is a compile-time scalar or a (P, 1) tile with data's partition count."""
    if x is None:
        return
    if is_tensor(x):
        if elems_of(x) != 1:
            fail(
                instr,
                f"operand '{name}' must be a scalar or a (P, 1) tensor, got shape {tuple(x.shape)}",
                "one element per partition",
            )
        if partitions_of(x) != partitions_of(data):
            fail(
                instr,
                f"operand '{name}' has {partitions_of(x)} partitions but the data has "
                f"{partitions_of(data)}",
                "a (P, 1) operand matches the data's partitions",
            )
        if fp32 and x.dtype.name != "float32":
            fail(instr, f"operand '{name}' has dtype {x.dtype.name}", "it must be float32")
    elif not is_scalar(x):
        fail(
            instr,
            f"operand '{name}' must be a number or a (P, 1) tensor, got {type(x).__name__} {x!r}",
        )


def check_unary_operand(instr: str, opname: str, operand: Any, what: str) -> None:
    """A unary op ignores its operand, which must be None or 0 (nki-api.md §7.3)."""
    if operand is None:
        return
    if is_tensor(operand) or not is_scalar(operand) or operand != 0:
        fail(
            instr,
            f"{opname} is a unary op but {what}={operand!r}",
            f"pass {what}=None (or 0) with a unary op",
        )


def check_psum_pair(instr: str, a: str, ta: Any, b: str, tb: Any) -> None:
    if is_tensor(ta) and is_tensor(tb) and ta.buffer.space == "psum" == tb.buffer.space:
        fail(
            instr,
            f"operands '{a}' and '{b}' are both in psum",
            "at most one of them may be in psum",
        )


def check_same_layout(instr: str, ref_name: str, ref: Any, **others: Any) -> None:
    """Same partition count and elements per partition as `ref` (shapes may differ)."""
    for n, t in others.items():
        if t is None or not is_tensor(t):
            continue
        if partitions_of(t) != partitions_of(ref) or elems_of(t) != elems_of(ref):
            fail(
                instr,
                f"operand '{n}' has shape {tuple(t.shape)} but '{ref_name}' has {tuple(ref.shape)}",
                "they need the same partitions and the same elements per partition",
            )


def check_max_rank(instr: str, rank: int, **tensors: Any) -> None:
    for n, t in tensors.items():
        if t is not None and is_tensor(t) and len(t.shape) > rank:
            fail(
                instr,
                f"operand '{n}' has {len(t.shape)} dimensions",
                f"at most {rank} (the partition dimension and {rank - 1} free dimensions)",
            )


def per_partition_values(x: Any, parts: int, *, bits: bool = False) -> np.ndarray:
    """A scalar or (P, 1) operand as a (P, 1) array: fp32 values, or int64 for bitvec."""
    if is_tensor(x):
        v = x.read() if bits else x.read_f32()
        return np.asarray(v).reshape(parts, 1).astype(np.int64 if bits else np.float32)
    if bits:
        return np.full((parts, 1), int(x), dtype=np.int64)
    return np.full((parts, 1), np.float32(0 if x is None else x), dtype=np.float32)


def rows(v: Any, *, bits: bool = False) -> np.ndarray:
    """An on-chip view's values as (P, N): fp32, or raw integers for bitvec."""
    a = v.read() if bits else v.read_f32()
    return a.reshape(a.shape[0] if a.ndim else 1, -1)


def store(dst: Any, values: np.ndarray, *, bits: bool = False) -> None:
    """Write (P, N) results into dst: low bits for bitvec results, else the hardware cast."""
    if bits:
        _ops.write_bits(dst, values)
    else:
        dst.write(np.asarray(values).reshape(dst.shape))
