"""Python operators on Beta-1 tiles: `a + b`, `x * 2.0`, `-x`, `~m`, `a < b`, ...

They lower to the same element-wise instructions as the nl functions, but, as in B1, do not
broadcast along the partition axis (a (1, F) tile with a (P, F) tile is
err_num_partition_mismatch). In-place forms (+=, -=, *=, /=) live on the tensor class.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trnsim.compat.neuronxcc.nki import _math as M
from trnsim.compat.neuronxcc.nki._index import IndexExpr
from trnsim.compat.neuronxcc.nki._indirect import DynIndex
from trnsim.compat.neuronxcc.nki._state import api
from trnsim.compat.neuronxcc.nki._tensor import tensor

_BINARY = {
    "add": "add",
    "sub": "subtract",
    "mul": "multiply",
    "truediv": "divide",
    "floordiv": None,
    "mod": "mod",
    "pow": "power",
    "lshift": "left_shift",
    "rshift": "right_shift",
    "and": "bitwise_and",
    "or": "bitwise_or",
    "xor": "bitwise_xor",
}
_COMPARE = {
    "lt": "less",
    "le": "less_equal",
    "gt": "greater",
    "ge": "greater_equal",
    "eq": "equal",
    "ne": "not_equal",
}


def _forward(op: str) -> Callable[[Any, Any], Any]:
    @api(f"tile operator {op}")
    def fn(self: tensor, other: Any) -> Any:
        if op == "add" and isinstance(other, IndexExpr):  # a runtime offset + an index
            return DynIndex(self, other)
        return M.binary(op, self, other, operator_form=True)

    return fn


def _reflected(op: str) -> Callable[[Any, Any], Any]:
    @api(f"tile operator {op}")
    def fn(self: tensor, other: Any) -> Any:
        return M.binary(op, other, self, operator_form=True)

    return fn


def _floordiv(self: tensor, other: Any) -> Any:
    raise NotImplementedError("// on tiles is not an NKI operator (use nl.divide and nl.floor)")


@api("tile operator neg")
def _neg(self: tensor) -> Any:
    return M.binary("multiply", self, -1, operator_form=True, dst_dtype=self.dtype)


@api("tile operator invert")
def _invert(self: tensor) -> Any:
    return M.unary_vector("invert", self)


@api("tile operator abs")
def _abs(self: tensor) -> Any:
    return M.unary_vector("abs", self)


def install() -> None:
    """Attach the operators to the tensor class."""
    for py, op in _BINARY.items():
        if op is None:
            setattr(tensor, f"__{py}__", _floordiv)
            setattr(tensor, f"__r{py}__", _floordiv)
            continue
        setattr(tensor, f"__{py}__", _forward(op))
        setattr(tensor, f"__r{py}__", _reflected(op))
    for py, op in _COMPARE.items():
        setattr(tensor, f"__{py}__", _forward(op))
    tensor.__neg__ = _neg  # type: ignore[method-assign]
    tensor.__invert__ = _invert  # type: ignore[method-assign]
    tensor.__abs__ = _abs  # type: ignore[method-assign]
    tensor.__pos__ = lambda self: self  # type: ignore[method-assign]


install()
