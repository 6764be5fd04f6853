"""ALU operator table (nki-api.md §8.1): name -> numpy function, op-name resolution, reductions
and the engines' accumulator registers (§8.3). Pure numpy; knows nothing about time.

Ops arrive as nl.* functions, numpy ufuncs (Beta 1) or strings; all resolve to one name.
Arithmetic ops compute in fp32; bitvec ops work on the raw bits of integers, as 32-bit lanes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from trnsim.errors import ConstraintError

_MASK32 = np.int64(0xFFFFFFFF)


def _abs_max(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    # The signed operand with the larger magnitude; ties return y (nki-api.md §6.2).
    return np.where(np.abs(x) > np.abs(y), x, y)


def _abs_min(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.where(np.abs(x) < np.abs(y), x, y)


def _as_bits(x: Any) -> np.ndarray:
    """The 32-bit lane pattern of integer values (sign-extended), as int64 in [0, 2^32)."""
    return np.asarray(x).astype(np.int64) & _MASK32


def _signed32(bits: np.ndarray) -> np.ndarray:
    """A 32-bit pattern read back as a signed int32 value (int64 array)."""
    return np.where(bits >= 2**31, bits - 2**32, bits)


def _shift_left(x: Any, y: Any) -> np.ndarray:
    s = np.asarray(y).astype(np.int64)
    out = (_as_bits(x) << np.clip(s, 0, 32)) & _MASK32
    return np.where((s >= 0) & (s < 32), out, 0)


def _shift_right(x: Any, y: Any) -> np.ndarray:
    # Logical shift (nki-api.md §8.1: arithmetic right shift is not supported).
    s = np.asarray(y).astype(np.int64)
    out = _as_bits(x) >> np.clip(s, 0, 32)
    return np.where((s >= 0) & (s < 32), out, 0)


ARITH: dict[str, Callable[..., np.ndarray]] = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": np.divide,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "power": np.power,
    "abs_max": _abs_max,
    "abs_min": _abs_min,
    "fmod": np.fmod,
    "mod": np.mod,
    "equal": lambda x, y: (x == y).astype(np.float32),
    "not_equal": lambda x, y: (x != y).astype(np.float32),
    "greater": lambda x, y: (x > y).astype(np.float32),
    "greater_equal": lambda x, y: (x >= y).astype(np.float32),
    "less": lambda x, y: (x < y).astype(np.float32),
    "less_equal": lambda x, y: (x <= y).astype(np.float32),
    "logical_and": lambda x, y: np.logical_and(x != 0, y != 0).astype(np.float32),
    "logical_or": lambda x, y: np.logical_or(x != 0, y != 0).astype(np.float32),
    "logical_xor": lambda x, y: np.logical_xor(x != 0, y != 0).astype(np.float32),
}
# Bitvec ops return the 32-bit result pattern as int64 in [0, 2^32); see apply_binary.
BITVEC: dict[str, Callable[..., np.ndarray]] = {
    "bitwise_and": lambda x, y: _as_bits(x) & _as_bits(y),
    "bitwise_or": lambda x, y: _as_bits(x) | _as_bits(y),
    "bitwise_xor": lambda x, y: _as_bits(x) ^ _as_bits(y),
    "left_shift": _shift_left,
    "right_shift": _shift_right,
}
UNARY: dict[str, Callable[..., np.ndarray]] = {
    "abs": np.abs,
    "square": np.square,
    "relu": lambda x: np.maximum(x, 0),
    "rsqrt": lambda x: 1 / np.sqrt(x),
    "reciprocal": lambda x: 1 / x,
    "logical_not": lambda x: (x == 0).astype(np.float32),
    "invert": lambda x: _as_bits(x) ^ _MASK32,
    "bypass": lambda x: x,
    "negative": np.negative,
    "sqrt": np.sqrt,
    "exp": np.exp,
}
COMPARISONS = ("equal", "not_equal", "greater", "greater_equal", "less", "less_equal")
REDUCE_IDENTITY = {
    "add": 0.0,
    "multiply": 1.0,
    "maximum": -np.inf,
    "minimum": np.inf,
    "bitwise_or": 0,
    "bitwise_and": -1,
    "bitwise_xor": 0,
    "logical_and": 1.0,
    "logical_or": 0.0,
    "logical_xor": 0.0,
    "abs_max": 0.0,
    "abs_min": np.inf,
    "subtract": 0.0,
}
# Legal as reductions (nki-api.md §8.1 "legal as reduction").
REDUCIBLE = (
    "add",
    "subtract",
    "multiply",
    "maximum",
    "minimum",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "logical_and",
    "logical_or",
    "logical_xor",
)

# Beta-1 accepts numpy functions as ops; nl.* names win.
_NUMPY_NAMES = {
    "amax": "maximum",
    "max": "maximum",
    "amin": "minimum",
    "min": "minimum",
    "sum": "add",
    "true_divide": "divide",
    "greater_equal": "greater_equal",
    "prod": "multiply",
    "absolute": "abs",
    "power": "power",
}


def op_name(op: Any, what: str = "op") -> str | None:
    """The canonical name of an ALU op given as nl.add, np.add, 'add' or None."""
    if op is None:
        return None
    if isinstance(op, str):
        name = op
    else:
        name = getattr(op, "nki_name", None) or getattr(op, "__name__", None)
        if name is None:
            raise ConstraintError(f"{what}={op!r} is not an ALU operator")
    name = _NUMPY_NAMES.get(name, name)
    if name not in ARITH and name not in BITVEC and name not in UNARY:
        known = sorted({*ARITH, *BITVEC, *UNARY})
        raise ConstraintError(f"{what}={name!r} is not an ALU operator (known: {', '.join(known)})")
    return name


def is_bitvec(name: str | None) -> bool:
    return name in BITVEC or name == "invert"


def is_unary(name: str | None) -> bool:
    return name in UNARY


def apply_binary(name: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x <op> y: fp32 arithmetic, or raw-bit integer ops for the bitvec class.

    Bitvec results are the 32-bit lane pattern read as a signed int32 value (int64 array),
    so `View.write` stores them correctly into int32/int16/int8 for in-range results; use
    `write_bits` to keep the low bits of any pattern (what the hardware stores).
    Unary ops ignore y.
    """
    if name in BITVEC:
        return _signed32(BITVEC[name](x, y))
    if name == "invert":
        return _signed32(UNARY[name](x))
    with np.errstate(all="ignore"):
        if name in UNARY:
            return np.asarray(UNARY[name](np.asarray(x, dtype=np.float32)), dtype=np.float32)
        return np.asarray(ARITH[name](x, y), dtype=np.float32)


def write_bits(dst: Any, values: np.ndarray) -> None:
    """Store integer values into an integer View keeping their low bits (bitvec results)."""
    v = np.asarray(values).astype(np.int64).reshape(dst.shape)
    if dst.dtype.kind == "bool":
        dst.write_raw(v != 0)
    else:
        dst.write_raw(v.astype(dst.dtype.storage))  # int64 -> narrower ints wraps (low bits)


# ---------------------------------------------------------------- reductions


def reduce_rows(name: str, x: np.ndarray) -> np.ndarray:
    """Reduce the last axis of x with ALU op `name`.

    Arithmetic: inputs are fp32 values; the result is accumulated in float64 and rounded to
    fp32 once (the hardware's summation order is not documented). `subtract` folds left:
    x0 - x1 - x2 - ... Bitvec: on 32-bit lane patterns, returned as signed int32 values.
    """
    if name in BITVEC:
        fn = {
            "bitwise_and": np.bitwise_and,
            "bitwise_or": np.bitwise_or,
            "bitwise_xor": np.bitwise_xor,
        }.get(name)
        if fn is None:
            raise ConstraintError(
                f"reduce op {name!r} is not a reduction (allowed: {', '.join(REDUCIBLE)})"
            )
        return _signed32(fn.reduce(_as_bits(x), axis=-1))
    v = np.asarray(x, dtype=np.float64)
    nz = v != 0
    with np.errstate(all="ignore"):
        table = {
            "add": lambda: v.sum(axis=-1),
            "multiply": lambda: v.prod(axis=-1),
            "maximum": lambda: v.max(axis=-1),
            "minimum": lambda: v.min(axis=-1),
            "subtract": lambda: 2 * v[..., 0] - v.sum(axis=-1),
            "logical_and": lambda: nz.all(axis=-1),
            "logical_or": lambda: nz.any(axis=-1),
            "logical_xor": lambda: nz.sum(axis=-1) % 2 == 1,
        }
        if name not in table:
            raise ConstraintError(
                f"reduce op {name!r} is not a reduction (allowed: {', '.join(REDUCIBLE)})"
            )
        return np.asarray(table[name](), dtype=np.float32)


def combine(name: str, acc: np.ndarray, row: np.ndarray) -> np.ndarray:
    """acc <op> row for accumulator registers (fp32; subtract accumulates acc - row)."""
    with np.errstate(all="ignore"):
        if name == "subtract":
            return np.asarray(acc - row, dtype=np.float32)
        return apply_binary(name, np.asarray(acc, np.float32), np.asarray(row, np.float32))


# ---------------------------------------------------------------- accumulator registers

REDUCE_CMDS = ("idle", "reset", "reduce", "reset_reduce", "load_reduce")


def reduce_cmd_name(cmd: Any, what: str = "reduce_cmd") -> str:
    """'idle' | 'reset' | 'reduce' | 'reset_reduce' | 'load_reduce' from an enum, int or str."""
    if cmd is None:
        return "idle"
    name = getattr(cmd, "name", None)
    if isinstance(name, str):
        cmd = name
    if isinstance(cmd, (int, np.integer)) and not isinstance(cmd, bool) and 0 <= cmd < 5:
        return REDUCE_CMDS[int(cmd)]
    if isinstance(cmd, str) and cmd in REDUCE_CMDS:
        return cmd
    raise ConstraintError(
        f"{what}={cmd!r} is not a reduce command (allowed: {', '.join(REDUCE_CMDS)})"
    )


def lanes_of(view: Any) -> np.ndarray:
    """Absolute partition (lane) index of each row of an on-chip view."""
    buf, lay = view.buffer, view.layout
    f = buf.elems_per_partition(lay.dtype)
    rows = np.arange(lay.shape[0] if lay.shape else 1, dtype=np.int64)
    pos = lay.offset + rows * (lay.strides[0] if lay.shape else 0)
    return buf.partition_start + pos // max(f, 1)


def accumulate(
    core: Any,
    engine: str,
    lanes: np.ndarray,
    cmd: str,
    op: str,
    row: np.ndarray | None,
    init: Any = None,
) -> np.ndarray:
    """Apply a reduce command to the per-lane fp32 accumulators of `engine`; return them.

    idle: untouched (the docs call the state unspecified); reset: op identity, no
    accumulation; reset_reduce: identity, then accumulate `row`; reduce: accumulate onto
    the current value; load_reduce: `init`, then accumulate.
    """
    acc = core.accumulators[engine]
    if cmd in ("reset", "reset_reduce"):
        acc[lanes] = REDUCE_IDENTITY[op]
    elif cmd == "load_reduce":
        acc[lanes] = np.broadcast_to(np.asarray(init, dtype=np.float32).reshape(-1), lanes.shape)
    if cmd in ("reduce", "reset_reduce", "load_reduce") and row is not None:
        acc[lanes] = combine(op, acc[lanes], np.asarray(row, np.float32).reshape(lanes.shape))
    return acc[lanes].copy()
