"""ALU operator table (nki-api.md §8.1): name -> fp32 numpy function, and op-name resolution.

Ops arrive as nl.* functions, numpy ufuncs (Beta 1) or strings; all resolve to one name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from trnsim.errors import ConstraintError


def _abs_max(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    # The signed operand with the larger magnitude; ties return y (nki-api.md §6.2).
    return np.where(np.abs(x) > np.abs(y), x, y)


def _abs_min(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.where(np.abs(x) < np.abs(y), x, y)


def _as_bits(x: np.ndarray) -> np.ndarray:
    return x


ARITH: dict[str, Callable[..., np.ndarray]] = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply,
    "divide": np.divide, "maximum": np.maximum, "minimum": np.minimum,
    "power": np.power, "abs_max": _abs_max, "abs_min": _abs_min,
    "fmod": np.fmod, "mod": np.mod,
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
BITVEC: dict[str, Callable[..., np.ndarray]] = {
    "bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor,
    "left_shift": np.left_shift, "right_shift": np.right_shift,
}
UNARY: dict[str, Callable[..., np.ndarray]] = {
    "abs": np.abs, "square": np.square, "relu": lambda x: np.maximum(x, 0),
    "rsqrt": lambda x: 1 / np.sqrt(x), "reciprocal": lambda x: 1 / x,
    "logical_not": lambda x: (x == 0).astype(np.float32), "invert": np.invert,
    "bypass": lambda x: x, "negative": np.negative, "sqrt": np.sqrt, "exp": np.exp,
}
REDUCE_IDENTITY = {"add": 0.0, "multiply": 1.0, "maximum": -np.inf, "minimum": np.inf,
                   "bitwise_or": 0, "bitwise_and": -1, "bitwise_xor": 0,
                   "logical_and": 1.0, "logical_or": 0.0, "logical_xor": 0.0,
                   "abs_max": 0.0, "abs_min": np.inf, "subtract": 0.0}

# Beta-1 accepts numpy functions as ops; nl.* names win.
_NUMPY_NAMES = {"amax": "maximum", "max": "maximum", "amin": "minimum", "min": "minimum",
                "sum": "add", "true_divide": "divide", "greater_equal": "greater_equal",
                "prod": "multiply", "absolute": "abs", "power": "power"}


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


def apply_binary(name: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x <op> y: fp32 arithmetic, or raw-bit integer ops for the bitvec class."""
    if name in BITVEC:
        return BITVEC[name](x, y)
    if name in UNARY:
        return UNARY[name](x)
    with np.errstate(all="ignore"):
        return np.asarray(ARITH[name](x, y), dtype=np.float32)
