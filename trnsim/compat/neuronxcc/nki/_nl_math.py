"""Beta-1 nl element-wise functions: ALU binaries, comparisons and logic, bitvec ops,
activation-table functions and the composites without a table entry (sin with range
reduction, cos, tan, floor, ceil, trunc).

Each is `f(x[, y], *, dtype=None, mask=None, **kwargs)` returning a tile (pending until its
destination is known, see _emit), and doubles as an operator constant (`op=nl.add`,
`op=nl.exp`) through its `nki_name`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from trnsim import dtypes as dt
from trnsim.compat.neuronxcc.nki import _math as M
from trnsim.compat.neuronxcc.nki._emit import run
from trnsim.compat.neuronxcc.nki._index import as_mask
from trnsim.compat.neuronxcc.nki._state import api, here

BINARY = {
    "add": "x + y",
    "subtract": "x - y",
    "multiply": "x * y",
    "divide": "x / y",
    "maximum": "element-wise max(x, y)",
    "minimum": "element-wise min(x, y)",
    "power": "x ** y (GpSimd)",
    "fmod": "C-style remainder (sign of x)",
    "mod": "Python-style modulo (sign of y)",
    "equal": "x == y (bool)",
    "not_equal": "x != y (bool)",
    "greater": "x > y (bool)",
    "greater_equal": "x >= y (bool)",
    "less": "x < y (bool)",
    "less_equal": "x <= y (bool)",
    "logical_and": "x and y (bool)",
    "logical_or": "x or y (bool)",
    "logical_xor": "x xor y (bool)",
    "bitwise_and": "x & y on integer bits",
    "bitwise_or": "x | y on integer bits",
    "bitwise_xor": "x ^ y on integer bits",
    "left_shift": "x << y on integer bits",
    "right_shift": "logical x >> y on integer bits",
}
ACTIVATIONS = (
    "exp",
    "log",
    "sqrt",
    "rsqrt",
    "tanh",
    "sigmoid",
    "relu",
    "silu",
    "silu_dx",
    "gelu",
    "gelu_dx",
    "gelu_apprx_tanh",
    "gelu_apprx_sigmoid",
    "mish",
    "softplus",
    "erf",
    "erf_dx",
    "arctan",
    "square",
    "sign",
)
VECTOR_UNARY = {
    "abs": "abs",
    "invert": "invert",
    "logical_not": "logical_not",
    "reciprocal": "reciprocal",
}


def _named(fn: Callable[..., Any], name: str, doc: str) -> Callable[..., Any]:
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    wrapped = api(f"nl.{name}")(fn)
    wrapped.nki_name = name  # type: ignore[attr-defined]
    return wrapped


def _binary(name: str) -> Callable[..., Any]:
    def fn(x: Any, y: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> Any:
        return M.binary(name, x, y, dtype=dtype, mask=mask)

    return _named(fn, name, f"{BINARY[name]}, element-wise (NumPy broadcasting).")


def _activation(name: str) -> Callable[..., Any]:
    def fn(x: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> Any:
        return M.activation(name, x, dtype=dtype, mask=mask)

    return _named(fn, name, f"{name}(x) on the Scalar Engine (activation).")


def _vector_unary(name: str) -> Callable[..., Any]:
    def fn(x: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> Any:
        if name == "reciprocal":
            x = M.tile(x, "nl.reciprocal", "x")
            return M.single(
                "reciprocal",
                shape=tuple(x.shape),
                dtype=M.out_dtype(dtype, x.dtype),
                inputs={"data": x},
                mask=mask,
                label="nl.reciprocal",
            )
        return M.unary_vector(VECTOR_UNARY[name], x, dtype=dtype, mask=mask)

    return _named(fn, name, f"{name}(x), element-wise on the Vector engine.")


def _negative(x: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> Any:
    x = M.tile(x, "nl.negative", "x")
    return M.binary("multiply", x, -1, dtype=dtype, mask=mask, dst_dtype=x.dtype)


def _copy_fn(x: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> Any:
    from trnsim.compat.neuronxcc.nki._nl_data import copy_tile

    return copy_tile(x, dtype=dtype, mask=mask)


def _sin_like(offset: float, name: str) -> Callable[..., Any]:
    def fn(x: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> Any:
        x = M.tile(x, f"nl.{name}", "x")
        reduced = M.range_reduced(x, offset, mask)
        return M.activation(
            "sin", reduced, dtype=M.out_dtype(dtype, x.dtype), mask=mask, api=f"nl.{name}"
        )

    return _named(
        fn,
        name,
        f"{name}(x): range reduction to [-pi, pi) on the Vector engine, "
        "then the Scalar Engine's sin.",
    )


def _tan(x: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> Any:
    x = M.tile(x, "nl.tan", "x")
    odt = M.out_dtype(dtype, x.dtype)
    loc, loops = here()
    m = as_mask(mask)
    shape = tuple(x.shape)
    s = M.fresh(shape, dt.float32, name="sin")
    c = M.fresh(shape, dt.float32, name="cos")
    for off, out in ((0.0, s), (math.pi / 2, c)):
        r = M.range_reduced(x, off, mask)
        run(
            "activation",
            "scalar",
            domain=shape,
            outputs={"dst": (out, None)},
            inputs={"data": r, "scale": 1.0},
            attrs={"op": "sin"},
            mask=m,
            loc=loc,
            loops=loops,
        )
    return M.binary("divide", s, c, dtype=odt, mask=mask)


def _rounding(kind: str) -> Callable[..., Any]:
    def fn(x: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> Any:
        return M.rounding(kind, x, dtype=dtype, mask=mask)

    return _named(fn, kind, f"{kind}(x): a Vector-engine composite (no activation-table entry).")


FUNCTIONS: dict[str, Callable[..., Any]] = {}
FUNCTIONS.update({n: _binary(n) for n in BINARY})
FUNCTIONS.update({n: _activation(n) for n in ACTIVATIONS})
FUNCTIONS.update({n: _vector_unary(n) for n in VECTOR_UNARY})
FUNCTIONS["negative"] = _named(_negative, "negative", "-x, element-wise (Vector engine).")
FUNCTIONS["copy"] = _named(
    _copy_fn, "copy", "A copy of the tile (identity activation constant as op=nl.copy)."
)
FUNCTIONS["sin"] = _sin_like(0.0, "sin")
FUNCTIONS["cos"] = _sin_like(math.pi / 2, "cos")
FUNCTIONS["tan"] = _named(_tan, "tan", "tan(x) = sin(x) / cos(x) with range reduction.")
FUNCTIONS.update({k: _rounding(k) for k in ("floor", "ceil", "trunc")})
