"""nki.language convenience wrappers (GA, "experimental"), element-wise part: each returns a
new tile. Data movement lives in lang_data, reductions and composites in lang_reduce.

Every wrapper allocates its result (SBUF; PSUM for Tensor Engine results) and issues the
nki.isa instruction(s) the NKI docs name (nki-api.md §6), so the program record and the
timing model see real instructions. The functions double as operator constants: `op=nl.add`
resolves by the function's __name__ (trnsim.semantics._ops.op_name).

Shape rules (GA, nki-api.md §4.4): binary functions take equal shapes, a (P, 1) tile against
a (P, F) tile (per-partition scalar, free-dim broadcast) or a Python scalar; anything else
needs nl.broadcast_to.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from trnsim import dtypes as _dt
from trnsim.dtype_promotion import promote
from trnsim.errors import ConstraintError
from trnsim.nki._isa_base import language_function
from trnsim.nki.tensor import NkiTensor, as_dtype
from trnsim.spec import show_value

__all__ = [
    "abs",
    "abs_max",
    "abs_min",
    "add",
    "arctan",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "bypass",
    "ceil",
    "cos",
    "divide",
    "equal",
    "erf",
    "erf_dx",
    "exp",
    "floor",
    "fmod",
    "gelu",
    "gelu_apprx_sigmoid",
    "gelu_apprx_sigmoid_dx",
    "gelu_apprx_tanh",
    "gelu_dx",
    "greater",
    "greater_equal",
    "invert",
    "left_shift",
    "less",
    "less_equal",
    "log",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
    "maximum",
    "minimum",
    "mish",
    "mod",
    "multiply",
    "negative",
    "not_equal",
    "power",
    "prelu",
    "reciprocal",
    "relu",
    "right_shift",
    "rsqrt",
    "sigmoid",
    "sign",
    "silu",
    "silu_dx",
    "sin",
    "softplus",
    "sqrt",
    "square",
    "subtract",
    "tan",
    "tanh",
    "trunc",
]

_PI = math.pi


def _isa() -> Any:
    from trnsim.nki import isa

    return isa


def _nl() -> Any:
    from trnsim.nki import language

    return language




# ---------------------------------------------------------------- helpers
def _tile(x: Any, fn: str, what: str = "x") -> NkiTensor:
    if not isinstance(x, NkiTensor):
        hint = (
            "; load it from a kernel argument (HBM tensor) first"
            if isinstance(x, np.ndarray)
            else ""
        )
        raise ConstraintError(f"nl.{fn}: {what} must be a tile, got {show_value(x)}{hint}")
    if not x.buffer.on_chip:
        raise ConstraintError(
            f"nl.{fn}: {what} is in {x.buffer.space}; nl.{fn} takes an SBUF or "
            "PSUM tile (load it first with nl.load)"
        )
    return x


def _new(shape: tuple[int, ...], dtype: Any, fn: str, buffer: Any = None) -> NkiTensor:
    nl = _nl()
    out = nl.ndarray(
        tuple(shape), as_dtype(dtype), nl.sbuf if buffer is None else buffer, name=f"{fn}_out"
    )
    out.buffer.computed_by = fn  # a value: a truth test on it asks for values (tensor_python)
    return out


def _is_scalar(v: Any) -> bool:
    return isinstance(v, (int, float, bool, np.integer, np.floating, np.bool_))


def _col(t: NkiTensor) -> bool:
    """A (P, 1)-shaped per-partition scalar tile."""
    return t.size == t.shape[0] and t.ndim >= 1


def _flat2d(t: NkiTensor) -> NkiTensor:
    """(P, ...) tile as (P, F) when its free dims merge; else unchanged."""
    if t.ndim == 2:
        return t
    try:
        return t.reshape((t.shape[0], int(np.prod(t.shape[1:], dtype=np.int64))))
    except ConstraintError:
        return t


# ---------------------------------------------------------------- element-wise binary
_BITVEC = {"bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift"}
_COMPARE = {"equal", "not_equal", "greater", "greater_equal", "less", "less_equal"}


def _binary(name: str, op: Callable[..., Any], x: Any, y: Any, dtype: Any) -> NkiTensor:
    nisa = _isa()
    if not isinstance(x, NkiTensor) and not isinstance(y, NkiTensor):
        raise ConstraintError(
            f"nl.{name}: at least one of x, y must be a tile, got "
            f"{type(x).__name__} and {type(y).__name__}"
        )
    if isinstance(x, NkiTensor):
        _tile(x, name, "x")
    if isinstance(y, NkiTensor):
        _tile(y, name, "y")
    if name in _BITVEC:
        for v, w in ((x, "x"), (y, "y")):
            if isinstance(v, NkiTensor) and v.dtype.kind not in ("int", "uint", "bool"):
                raise ConstraintError(
                    f"nl.{name}: {w} has dtype {v.dtype.name}; bitwise ops take integer tiles"
                )
    if isinstance(x, NkiTensor) and isinstance(y, NkiTensor):
        if tuple(x.shape) == tuple(y.shape):
            out = _new(x.shape, dtype or promote(x.dtype, y.dtype), name)
            nisa.tensor_tensor(dst=out, data1=x, data2=y, op=op)
            return out
        big, small, rev = (x, y, False) if _col(y) else (y, x, True)
        if _col(small) and small.shape[0] == big.shape[0]:
            out = _new(big.shape, dtype or promote(x.dtype, y.dtype), name)
            nisa.tensor_scalar(dst=out, data=big, op0=op, operand0=small, reverse0=rev)
            return out
        raise ConstraintError(
            f"nl.{name}: shapes {list(x.shape)} and {list(y.shape)} differ; "
            "GA nl.* functions do not broadcast (a (P, 1) tile against (P, F) "
            "is allowed); use nl.broadcast_to"
        )
    tile, scalar, rev = (x, y, False) if isinstance(x, NkiTensor) else (y, x, True)
    out = _new(tile.shape, dtype or tile.dtype, name)
    nisa.tensor_scalar(dst=out, data=tile, op0=op, operand0=_scalar_value(scalar), reverse0=rev)
    return out


def _scalar_value(v: Any) -> Any:
    if not _is_scalar(v):
        raise ConstraintError(f"expected a tile or a scalar, got {show_value(v)}")
    return v.item() if isinstance(v, np.generic) else v


def _make_binary(name: str, doc: str) -> Callable[..., Any]:
    def fn(x: Any, y: Any, dtype: Any = None) -> NkiTensor:
        return _binary(name, wrapped, x, y, dtype)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    wrapped = language_function(fn)
    return wrapped


add = _make_binary("add", "x + y, element-wise (VectorE tensor_tensor / tensor_scalar).")
subtract = _make_binary("subtract", "x - y, element-wise.")
multiply = _make_binary("multiply", "x * y, element-wise.")
divide = _make_binary("divide", "x / y, element-wise (simulator; hardware has no divide).")
maximum = _make_binary("maximum", "Element-wise maximum.")
minimum = _make_binary("minimum", "Element-wise minimum.")
power = _make_binary("power", "x ** y, element-wise (GpSimd).")
abs_max = _make_binary("abs_max", "The operand with the larger magnitude (ties: y).")
abs_min = _make_binary("abs_min", "The operand with the smaller magnitude (ties: y).")
fmod = _make_binary("fmod", "C-style remainder (sign of x).")
mod = _make_binary("mod", "Python-style modulo (sign of y).")
bitwise_and = _make_binary("bitwise_and", "x & y on integer tiles.")
bitwise_or = _make_binary("bitwise_or", "x | y on integer tiles.")
bitwise_xor = _make_binary("bitwise_xor", "x ^ y on integer tiles.")
left_shift = _make_binary("left_shift", "x << y on integer tiles.")
right_shift = _make_binary("right_shift", "x >> y (logical) on integer tiles.")
equal = _make_binary("equal", "1 where x == y, else 0 (in the output dtype).")
not_equal = _make_binary("not_equal", "1 where x != y, else 0.")
greater = _make_binary("greater", "1 where x > y, else 0.")
greater_equal = _make_binary("greater_equal", "1 where x >= y, else 0.")
less = _make_binary("less", "1 where x < y, else 0.")
less_equal = _make_binary("less_equal", "1 where x <= y, else 0.")
logical_and = _make_binary("logical_and", "x AND y (non-zero is true).")
logical_or = _make_binary("logical_or", "x OR y.")
logical_xor = _make_binary("logical_xor", "x XOR y.")


# ---------------------------------------------------------------- activations (ScalarE)
def _activation(name: str, op: Any, x: Any, dtype: Any) -> NkiTensor:
    x = _tile(x, name)
    out = _new(x.shape, dtype or x.dtype, name)
    _isa().activation(dst=out, op=op, data=x)
    return out


def _make_activation(name: str, doc: str) -> Callable[..., Any]:
    def fn(x: Any, dtype: Any = None) -> NkiTensor:
        return _activation(name, wrapped, x, dtype)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    wrapped = language_function(fn)
    return wrapped


exp = _make_activation("exp", "e**x (ScalarE activation).")
log = _make_activation("log", "Natural logarithm (ScalarE activation).")
sqrt = _make_activation("sqrt", "Square root (ScalarE activation).")
rsqrt = _make_activation("rsqrt", "1 / sqrt(x) (ScalarE activation).")
tanh = _make_activation("tanh", "Hyperbolic tangent (ScalarE activation).")
arctan = _make_activation("arctan", "Inverse tangent (ScalarE activation).")
square = _make_activation("square", "x * x (ScalarE activation).")
sign = _make_activation("sign", "-1, 0 or 1 (ScalarE activation).")
abs = _make_activation("abs", "|x| (ScalarE activation).")
relu = _make_activation("relu", "max(x, 0) (ScalarE activation).")
sigmoid = _make_activation("sigmoid", "1 / (1 + e**-x) (ScalarE activation).")
silu = _make_activation("silu", "x * sigmoid(x) (ScalarE activation).")
silu_dx = _make_activation("silu_dx", "Derivative of silu (ScalarE activation).")
gelu = _make_activation("gelu", "x * Phi(x) (ScalarE activation).")
gelu_dx = _make_activation("gelu_dx", "Derivative of gelu (ScalarE activation).")
gelu_apprx_tanh = _make_activation("gelu_apprx_tanh", "tanh-approximated gelu (ScalarE).")
gelu_apprx_sigmoid = _make_activation("gelu_apprx_sigmoid", "x * sigmoid(1.702 x) (ScalarE).")
gelu_apprx_sigmoid_dx = _make_activation(
    "gelu_apprx_sigmoid_dx", "Derivative of gelu_apprx_sigmoid (ScalarE)."
)
mish = _make_activation("mish", "x * tanh(softplus(x)) (ScalarE activation).")
softplus = _make_activation("softplus", "log(1 + e**x) (ScalarE activation).")
erf = _make_activation("erf", "Error function (ScalarE activation).")
erf_dx = _make_activation("erf_dx", "Derivative of erf (ScalarE activation).")


@language_function
def reciprocal(x: Any, dtype: Any = None) -> NkiTensor:
    """1 / x on the Vector Engine (nisa.reciprocal: precise, unlike the ScalarE table)."""
    x = _tile(x, "reciprocal")
    out = _new(x.shape, dtype or x.dtype, "reciprocal")
    _isa().reciprocal(dst=out, data=x)
    return out


@language_function
def negative(x: Any, dtype: Any = None) -> NkiTensor:
    """-x (VectorE tensor_scalar multiply by -1)."""
    x = _tile(x, "negative")
    out = _new(x.shape, dtype or x.dtype, "negative")
    _isa().tensor_scalar(dst=out, data=x, op0=multiply, operand0=-1.0)
    return out


@language_function
def prelu(x: Any, alpha: float = 0.01, dtype: Any = None) -> NkiTensor:
    """max(x, 0) + alpha * min(x, 0) (also the activate2 op constant)."""
    x = _tile(x, "prelu")
    nisa = _isa()
    neg = _new(x.shape, _dt.float32, "prelu")
    nisa.tensor_scalar(
        dst=neg, data=x, op0=minimum, operand0=0.0, op1=multiply, operand1=float(alpha)
    )
    out = _new(x.shape, dtype or x.dtype, "prelu")
    nisa.scalar_tensor_tensor(dst=out, data=x, op0=maximum, operand0=0.0, op1=add, operand1=neg)
    return out


@language_function
def bypass(x: Any, dtype: Any = None) -> NkiTensor:
    """Identity (the activate2 pass-through stage constant); as a function, a copy."""
    from trnsim.nki.lang_data import copy

    return copy(x, dtype)


@language_function
def logical_not(x: Any, dtype: Any = None) -> NkiTensor:
    """1 where x == 0, else 0."""
    x = _tile(x, "logical_not")
    out = _new(x.shape, dtype or x.dtype, "logical_not")
    _isa().tensor_scalar(dst=out, data=x, op0=equal, operand0=0)
    return out


@language_function
def invert(x: Any, dtype: Any = None) -> NkiTensor:
    """Bitwise NOT of an integer tile (XOR with all ones)."""
    x = _tile(x, "invert")
    if x.dtype.kind not in ("int", "uint", "bool"):
        raise ConstraintError(f"nl.invert: x has dtype {x.dtype.name}; invert takes integer tiles")
    ones = -1 if x.dtype.kind == "int" else (1 << (8 * x.dtype.itemsize)) - 1
    out = _new(x.shape, dtype or x.dtype, "invert")
    _isa().tensor_scalar(dst=out, data=x, op0=bitwise_xor, operand0=ones)
    return out


def _range_reduced(x: NkiTensor, shift: float, fn: str) -> NkiTensor:
    """(x + shift + pi) mod 2pi - pi, in fp32: the argument reduction nl.sin/cos add."""
    nisa = _isa()
    red = _new(x.shape, _dt.float32, fn)
    nisa.tensor_scalar(dst=red, data=x, op0=add, operand0=shift + _PI, op1=mod, operand1=2 * _PI)
    nisa.tensor_scalar(dst=red, data=red, op0=subtract, operand0=_PI)
    return red


@language_function
def sin(x: Any, dtype: Any = None) -> NkiTensor:
    """sin(x) with range reduction into [-pi, pi] (the activation table's valid range)."""
    x = _tile(x, "sin")
    out = _new(x.shape, dtype or x.dtype, "sin")
    _isa().activation(dst=out, op=sin, data=_range_reduced(x, 0.0, "sin"))
    return out


@language_function
def cos(x: Any, dtype: Any = None) -> NkiTensor:
    """cos(x) = sin(x + pi/2), range-reduced (no activation-table entry for cos)."""
    x = _tile(x, "cos")
    out = _new(x.shape, dtype or x.dtype, "cos")
    _isa().activation(dst=out, op=sin, data=_range_reduced(x, _PI / 2, "cos"))
    return out


@language_function
def tan(x: Any, dtype: Any = None) -> NkiTensor:
    """sin(x) / cos(x) (composite)."""
    x = _tile(x, "tan")
    s, c = sin(x, _dt.float32), cos(x, _dt.float32)
    out = _new(x.shape, dtype or x.dtype, "tan")
    _isa().tensor_tensor(dst=out, data1=s, data2=c, op=divide)
    return out


def _round(x: Any, dtype: Any, fn: str) -> NkiTensor:
    """trunc / floor / ceil from fmod(x, 1): composite VectorE lowering."""
    x = _tile(x, fn)
    nisa = _isa()
    frac = _new(x.shape, _dt.float32, fn)
    nisa.tensor_scalar(dst=frac, data=x, op0=fmod, operand0=1.0)
    whole = _new(x.shape, _dt.float32 if fn != "trunc" else (dtype or x.dtype), fn)
    nisa.tensor_tensor(dst=whole, data1=x, data2=frac, op=subtract)
    if fn == "trunc":
        return whole
    step = _new(x.shape, _dt.float32, fn)
    nisa.tensor_scalar(dst=step, data=frac, op0=less if fn == "floor" else greater, operand0=0.0)
    out = _new(x.shape, dtype or x.dtype, fn)
    nisa.tensor_tensor(dst=out, data1=whole, data2=step, op=subtract if fn == "floor" else add)
    return out


@language_function
def trunc(x: Any, dtype: Any = None) -> NkiTensor:
    """Round toward zero (composite)."""
    return _round(x, dtype, "trunc")


@language_function
def floor(x: Any, dtype: Any = None) -> NkiTensor:
    """Round toward -inf (composite)."""
    return _round(x, dtype, "floor")


@language_function
def ceil(x: Any, dtype: Any = None) -> NkiTensor:
    """Round toward +inf (composite)."""
    return _round(x, dtype, "ceil")
