"""nki.language convenience wrappers (GA, "experimental"): each returns a new tile.

Every wrapper allocates its result (SBUF; PSUM for Tensor Engine results) and issues the
nki.isa instruction(s) the NKI docs name (nki-api.md §6), so the program record and the
timing model see real instructions. The functions double as operator constants: `op=nl.add`
resolves by the function's __name__ (trnsim.semantics._ops.op_name).

Shape rules (GA, nki-api.md §4.4): binary functions take equal shapes, a (P, 1) tile against
a (P, F) tile (per-partition scalar, free-dim broadcast) or a Python scalar; anything else
needs nl.broadcast_to.
"""

from __future__ import annotations

import builtins
import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from trnsim import dtypes as _dt
from trnsim.errors import ConstraintError, KernelError
from trnsim.nki.tensor import NkiTensor, as_dtype
from trnsim.program import capture_location

__all__ = [
    "abs",
    "abs_max",
    "abs_min",
    "add",
    "all",
    "arctan",
    "average",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "broadcast_to",
    "bypass",
    "ceil",
    "copy",
    "cos",
    "divide",
    "dropout",
    "equal",
    "erf",
    "erf_dx",
    "exp",
    "expand_dims",
    "floor",
    "fmod",
    "gather_flattened",
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
    "load",
    "load_transpose2d",
    "log",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
    "matmul",
    "max",
    "maximum",
    "mean",
    "min",
    "minimum",
    "mish",
    "mod",
    "multiply",
    "negative",
    "not_equal",
    "power",
    "prelu",
    "prod",
    "reciprocal",
    "relu",
    "right_shift",
    "rms_norm",
    "rsqrt",
    "sigmoid",
    "sign",
    "silu",
    "silu_dx",
    "sin",
    "softmax",
    "softplus",
    "sqrt",
    "square",
    "store",
    "subtract",
    "sum",
    "tan",
    "tanh",
    "transpose",
    "trunc",
    "var",
    "where",
]

_PI = math.pi


def _isa() -> Any:
    from trnsim.nki import isa

    return isa


def _nl() -> Any:
    from trnsim.nki import language

    return language


def _api(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Attach the user's line to KernelErrors (also those raised by the ISA calls inside)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except KernelError as e:
            raise e.with_loc(capture_location()) from None

    wrapper.nki_name = fn.__name__  # type: ignore[attr-defined]
    return wrapper


# ---------------------------------------------------------------- helpers
def _tile(x: Any, fn: str, what: str = "x") -> NkiTensor:
    if not isinstance(x, NkiTensor):
        raise ConstraintError(f"nl.{fn}: {what} must be a tile, got {type(x).__name__} {x!r}")
    if not x.buffer.on_chip:
        raise ConstraintError(
            f"nl.{fn}: {what} is in {x.buffer.space}; nl.{fn} takes an SBUF or "
            "PSUM tile (load it first with nl.load)"
        )
    return x


def _new(shape: tuple[int, ...], dtype: Any, fn: str, buffer: Any = None) -> NkiTensor:
    nl = _nl()
    return nl.ndarray(
        tuple(shape), as_dtype(dtype), nl.sbuf if buffer is None else buffer, name=f"{fn}_out"
    )


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
            out = _new(x.shape, dtype or _dt.promote(x.dtype, y.dtype), name)
            nisa.tensor_tensor(dst=out, data1=x, data2=y, op=op)
            return out
        big, small, rev = (x, y, False) if _col(y) else (y, x, True)
        if _col(small) and small.shape[0] == big.shape[0]:
            out = _new(big.shape, dtype or _dt.promote(x.dtype, y.dtype), name)
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
        raise ConstraintError(f"expected a tile or a scalar, got {type(v).__name__} {v!r}")
    return v.item() if isinstance(v, np.generic) else v


def _make_binary(name: str, doc: str) -> Callable[..., Any]:
    def fn(x: Any, y: Any, dtype: Any = None) -> NkiTensor:
        return _binary(name, wrapped, x, y, dtype)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    wrapped = _api(fn)
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
    wrapped = _api(fn)
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


@_api
def reciprocal(x: Any, dtype: Any = None) -> NkiTensor:
    """1 / x on the Vector Engine (nisa.reciprocal: precise, unlike the ScalarE table)."""
    x = _tile(x, "reciprocal")
    out = _new(x.shape, dtype or x.dtype, "reciprocal")
    _isa().reciprocal(dst=out, data=x)
    return out


@_api
def negative(x: Any, dtype: Any = None) -> NkiTensor:
    """-x (VectorE tensor_scalar multiply by -1)."""
    x = _tile(x, "negative")
    out = _new(x.shape, dtype or x.dtype, "negative")
    _isa().tensor_scalar(dst=out, data=x, op0=multiply, operand0=-1.0)
    return out


@_api
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


@_api
def bypass(x: Any, dtype: Any = None) -> NkiTensor:
    """Identity (the activate2 pass-through stage constant); as a function, a copy."""
    return copy(x, dtype)


@_api
def logical_not(x: Any, dtype: Any = None) -> NkiTensor:
    """1 where x == 0, else 0."""
    x = _tile(x, "logical_not")
    out = _new(x.shape, dtype or x.dtype, "logical_not")
    _isa().tensor_scalar(dst=out, data=x, op0=equal, operand0=0)
    return out


@_api
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


@_api
def sin(x: Any, dtype: Any = None) -> NkiTensor:
    """sin(x) with range reduction into [-pi, pi] (the activation table's valid range)."""
    x = _tile(x, "sin")
    out = _new(x.shape, dtype or x.dtype, "sin")
    _isa().activation(dst=out, op=sin, data=_range_reduced(x, 0.0, "sin"))
    return out


@_api
def cos(x: Any, dtype: Any = None) -> NkiTensor:
    """cos(x) = sin(x + pi/2), range-reduced (no activation-table entry for cos)."""
    x = _tile(x, "cos")
    out = _new(x.shape, dtype or x.dtype, "cos")
    _isa().activation(dst=out, op=sin, data=_range_reduced(x, _PI / 2, "cos"))
    return out


@_api
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


@_api
def trunc(x: Any, dtype: Any = None) -> NkiTensor:
    """Round toward zero (composite)."""
    return _round(x, dtype, "trunc")


@_api
def floor(x: Any, dtype: Any = None) -> NkiTensor:
    """Round toward -inf (composite)."""
    return _round(x, dtype, "floor")


@_api
def ceil(x: Any, dtype: Any = None) -> NkiTensor:
    """Round toward +inf (composite)."""
    return _round(x, dtype, "ceil")


# ---------------------------------------------------------------- data movement
@_api
def load(src: Any, dtype: Any = None) -> NkiTensor:
    """HBM -> a new SBUF tile shaped like src (one dma_copy)."""
    if not isinstance(src, NkiTensor) or src.buffer.on_chip:
        where = src.buffer.space if isinstance(src, NkiTensor) else type(src).__name__
        raise ConstraintError(f"nl.load: src must be an HBM tensor, got {where}")
    out = _new(src.shape, dtype or src.dtype, "load")
    _isa().dma_copy(dst=out, src=src)
    return out


@_api
def store(dst: Any, value: Any) -> None:
    """An SBUF tile -> HBM (one dma_copy); PSUM values must be copied to SBUF first (GA)."""
    if not isinstance(dst, NkiTensor) or dst.buffer.on_chip:
        where = dst.buffer.space if isinstance(dst, NkiTensor) else type(dst).__name__
        raise ConstraintError(f"nl.store: dst must be an HBM tensor, got {where}")
    value = _tile(value, "store", "value")
    if value.buffer.space == "psum":
        raise ConstraintError(
            "nl.store: value is in psum; the DMA cannot read PSUM (copy it to "
            "SBUF first, e.g. nl.copy or nisa.tensor_copy)"
        )
    _isa().dma_copy(dst=dst, src=value)


@_api
def load_transpose2d(src: Any, dtype: Any = None) -> NkiTensor:
    """HBM [a, b] -> SBUF [b, a]: a DMA with a transposing (element-strided) access pattern."""
    if not isinstance(src, NkiTensor) or src.buffer.on_chip or src.ndim != 2:
        raise ConstraintError("nl.load_transpose2d: src must be a 2-D HBM tensor")
    out = _new((src.shape[1], src.shape[0]), dtype or src.dtype, "load_transpose2d")
    _isa().dma_copy(dst=out, src=src.permute((1, 0)))
    return out


@_api
def copy(x: Any, dtype: Any = None) -> NkiTensor:
    """A copy of the tile in the same buffer (VectorE tensor_copy: bit-exact for equal dtypes)."""
    x = _tile(x, "copy")
    out = _new(x.shape, dtype or x.dtype, "copy", x.buffer)
    _isa().tensor_copy(dst=out, src=x)
    return out


@_api
def broadcast_to(x: Any, shape: Any, dtype: Any = None) -> NkiTensor:
    """numpy broadcast of size-1 dims (same rank): free dims via a stride-0 view + VectorE
    copy, the partition dim via a DMA that repeats the source partition."""
    x = _tile(x, "broadcast_to")
    shape = tuple(int(s) for s in shape)
    if len(shape) != x.ndim:
        raise ConstraintError(
            f"nl.broadcast_to: shape {list(shape)} must have the rank of x {list(x.shape)}"
        )
    if shape == tuple(x.shape):
        return x if dtype is None or as_dtype(dtype) == x.dtype else copy(x, dtype)
    view = x
    for d, (have, want) in enumerate(zip(x.shape, shape, strict=True)):
        if have == want:
            continue
        if have != 1:
            raise ConstraintError(
                f"nl.broadcast_to: dimension {d} has size {have}; only size-1 "
                f"dimensions broadcast (to {want})"
            )
        if d == 0:
            view = type(view)(view.buffer, _partition_broadcast(view.layout, want))
        else:
            view = view.broadcast(d, want)
    out = _new(shape, dtype or x.dtype, "broadcast_to")
    if shape[0] != x.shape[0]:
        _isa().dma_copy(dst=out, src=view)
    else:
        _isa().tensor_copy(dst=out, src=view)
    return out


def _partition_broadcast(lay: Any, n: int) -> Any:
    from trnsim.memory import Layout

    return Layout(lay.dtype, lay.offset, (n, *lay.shape[1:]), (0, *lay.strides[1:]))


@_api
def expand_dims(x: Any, axis: int) -> NkiTensor:
    """A view of x with a size-1 axis inserted at `axis` (no data movement)."""
    if not isinstance(x, NkiTensor):
        raise ConstraintError(f"nl.expand_dims: x must be a tensor, got {type(x).__name__}")
    return x.expand_dim(axis)


@_api
def transpose(x: Any, dtype: Any = None) -> NkiTensor:
    """2-D partition <-> free swap: TensorE into PSUM, or VectorE (SBUF) up to 32 x 32."""
    x = _tile(x, "transpose")
    if x.ndim != 2:
        raise ConstraintError(f"nl.transpose: x must be 2-D, got shape {list(x.shape)}")
    nl = _nl()
    small = x.shape[0] <= 32 and x.shape[1] <= 32
    out = _new((x.shape[1], x.shape[0]), x.dtype, "transpose", nl.sbuf if small else nl.psum)
    engine = _isa().engine.vector if small else _isa().engine.tensor
    _isa().nc_transpose(dst=out, data=x, engine=engine)
    if dtype is not None and as_dtype(dtype) != x.dtype:
        return copy(out, dtype)
    return out


@_api
def matmul(x: Any, y: Any, transpose_x: bool = False) -> NkiTensor:
    """x @ y (or x.T @ y with transpose_x=True, x given as [K, M]) on the Tensor Engine;
    the fp32 result lands in PSUM. Without transpose_x, x is transposed first."""
    x = _tile(x, "matmul", "x")
    y = _tile(y, "matmul", "y")
    nl = _nl()
    if not transpose_x:
        xt = transpose(x)
        if xt.buffer.space == "psum":
            xt = copy_to_sbuf(xt)
        x = xt
    if x.shape[0] != y.shape[0]:
        raise ConstraintError(
            f"nl.matmul: contraction sizes differ: x has {x.shape[0]} rows "
            f"on the partition axis (after transpose_x={transpose_x}), y has "
            f"{y.shape[0]}"
        )
    out = _new((x.shape[1], *y.shape[1:]), _dt.float32, "matmul", nl.psum)
    _isa().nc_matmul(dst=out, stationary=x, moving=y)
    return out


def copy_to_sbuf(t: NkiTensor) -> NkiTensor:
    out = _new(t.shape, t.dtype, "copy")
    _isa().tensor_copy(dst=out, src=t)
    return out


@_api
def gather_flattened(data: Any, indices: Any, axis: int = 0, dtype: Any = None) -> NkiTensor:
    """Per partition, out = data_row.flatten()[indices_row] (GpSimd nc_n_gather)."""
    data = _tile(data, "gather_flattened", "data")
    indices = _tile(indices, "gather_flattened", "indices")
    out = _new(indices.shape, dtype or data.dtype, "gather_flattened")
    _isa().nc_n_gather(dst=out, data=data, indices=indices)
    return out


@_api
def where(condition: Any, x: Any, y: Any, dtype: Any = None) -> NkiTensor:
    """x where condition (1.0 / 0.0 tile) is non-zero, else y (VectorE predicated copy)."""
    condition = _tile(condition, "where", "condition")
    ref = x if isinstance(x, NkiTensor) else y
    if not isinstance(ref, NkiTensor):
        raise ConstraintError("nl.where: x or y must be a tile")
    nisa = _isa()
    out = _new(condition.shape, dtype or ref.dtype, "where")
    if isinstance(y, NkiTensor):
        nisa.tensor_copy(dst=out, src=_tile(y, "where", "y"))
    else:
        nisa.memset(dst=out, value=_scalar_value(y))
    src = x
    if isinstance(x, NkiTensor) and x.dtype != out.dtype:
        src = _new(x.shape, out.dtype, "where")
        nisa.tensor_copy(dst=src, src=x)
    pred = condition
    if condition.dtype.name not in ("uint8", "uint16", "uint32"):
        pred = _new(condition.shape, _dt.uint8, "where")
        nisa.tensor_scalar(dst=pred, data=condition, op0=not_equal, operand0=0.0)
    nisa.tensor_copy_predicated(dst=out, src=src, predicate=pred)
    return out


@_api
def dropout(x: Any, rate: Any, dtype: Any = None) -> NkiTensor:
    """Zero each element with probability `rate` (VectorE nisa.dropout)."""
    x = _tile(x, "dropout")
    out = _new(x.shape, dtype or x.dtype, "dropout")
    _isa().dropout(dst=out, data=x, prob=rate)
    return out


# ---------------------------------------------------------------- reductions
def _axes(x: NkiTensor, axis: Any, fn: str) -> tuple[int, ...]:
    if axis is None:
        raise ConstraintError(f"nl.{fn}: axis is required (free axes of the tile)")
    raw = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    axes = tuple(sorted(int(a) % x.ndim if int(a) < 0 else int(a) for a in raw))
    if 0 in axes or builtins.any(a >= x.ndim for a in axes):
        raise ConstraintError(
            f"nl.{fn}: axis {axis} must name free axes 1..{x.ndim - 1} of a "
            f"{x.ndim}-D tile (axis 0 is the partition axis)"
        )
    if axes != tuple(range(x.ndim - len(axes), x.ndim)):
        raise ConstraintError(
            f"nl.{fn}: axis {axis} must be the last contiguous axes of the tile ([1], [1, 2], ...)"
        )
    return axes


def _reduced_shape(x: NkiTensor, axes: tuple[int, ...], keepdims: bool) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if d in axes else n for d, n in enumerate(x.shape))
    return tuple(n for d, n in enumerate(x.shape) if d not in axes)


def _reduce(
    fn: str, op: Any, x: Any, axis: Any, dtype: Any, keepdims: bool, negate: bool = False
) -> NkiTensor:
    x = _tile(x, fn)
    axes = _axes(x, axis, fn)
    out = _new(_reduced_shape(x, axes, keepdims), dtype or x.dtype, fn)
    _isa().tensor_reduce(dst=out, op=op, data=x, axis=axes, negate=negate, keepdims=keepdims)
    return out


@_api
def sum(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False) -> NkiTensor:
    """Sum over trailing free axes (VectorE tensor_reduce)."""
    return _reduce("sum", add, x, axis, dtype, keepdims)


@_api
def max(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False) -> NkiTensor:
    """Maximum over trailing free axes."""
    return _reduce("max", maximum, x, axis, dtype, keepdims)


@_api
def min(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False) -> NkiTensor:
    """Minimum over trailing free axes."""
    return _reduce("min", minimum, x, axis, dtype, keepdims)


@_api
def prod(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False) -> NkiTensor:
    """Product over trailing free axes."""
    return _reduce("prod", multiply, x, axis, dtype, keepdims)


@_api
def all(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False) -> NkiTensor:
    """Logical AND over trailing free axes (1 if every element is non-zero)."""
    return _reduce("all", logical_and, x, axis, dtype, keepdims)


@_api
def mean(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False) -> NkiTensor:
    """Mean over trailing free axes: an fp32 sum, then a scale by 1/n."""
    x = _tile(x, "mean")
    axes = _axes(x, axis, "mean")
    n = int(np.prod([x.shape[a] for a in axes]))
    total = _reduce("mean", add, x, axes, _dt.float32, keepdims)
    out = _new(total.shape, dtype or x.dtype, "mean")
    _isa().tensor_scalar(dst=out, data=total, op0=multiply, operand0=1.0 / n)
    return out


@_api
def average(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False) -> NkiTensor:
    """Mean (also the `average` reduce-op constant of nisa.tensor_partition_reduce)."""
    return mean(x, axis, dtype, keepdims)


@_api
def var(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False) -> NkiTensor:
    """Population variance over trailing free axes (result keeps the reduced axes).

    Over all free axes of a tile this is bn_stats (chunks of bn_stats_fmax) + bn_aggr;
    otherwise mean(x*x) - mean(x)**2 from VectorE reductions.
    """
    x = _tile(x, "var")
    axes = _axes(x, axis, "var")
    nisa = _isa()
    shape = _reduced_shape(x, axes, True)
    out = _new(shape, dtype or x.dtype, "var")
    flat = _flat2d(x) if len(axes) == x.ndim - 1 else None
    if flat is not None and flat.ndim == 2:
        p, f = flat.shape
        fmax = _nl().tile_size.bn_stats_fmax
        chunks = -(-f // fmax)
        stats = _new((p, 6 * chunks), _dt.float32, "var")
        for c in range(chunks):
            nisa.bn_stats(
                dst=stats[:, 6 * c : 6 * c + 6],
                data=flat[:, c * fmax : builtins.min(f, (c + 1) * fmax)],
            )
        agg = _new((p, 2), _dt.float32, "var")
        nisa.bn_aggr(dst=agg, data=stats)
        nisa.tensor_copy(dst=out.reshape((p, 1)), src=agg[:, 1:2])
        return out
    n = float(np.prod([x.shape[a] for a in axes]))
    sq = _new(x.shape, _dt.float32, "var")
    nisa.tensor_tensor(dst=sq, data1=x, data2=x, op=multiply)
    s1 = _reduce("var", add, x, axes, _dt.float32, True)
    s2 = _reduce("var", add, sq, axes, _dt.float32, True)
    m2 = _new(shape, _dt.float32, "var")
    nisa.tensor_tensor(dst=m2, data1=s1, data2=s1, op=multiply)  # sum^2
    # var = s2/n - (s1/n)^2 = (s2 - sum^2/n) / n
    nisa.scalar_tensor_tensor(
        dst=m2, data=m2, op0=multiply, operand0=-1.0 / n, op1=add, operand1=s2
    )
    nisa.tensor_scalar(dst=out, data=m2, op0=multiply, operand0=1.0 / n)
    return out


# ---------------------------------------------------------------- composites
@_api
def softmax(x: Any, axis: Any = -1, dtype: Any = None) -> NkiTensor:
    """exp(x - max) / sum(exp(x - max)) over trailing free axes.

    Lowering: tensor_reduce(max, negate) -> activation(exp, bias=-max, accumulate the sum)
    -> reciprocal -> tensor_scalar multiply (per-partition scale).
    """
    x = _tile(x, "softmax")
    axes = _axes(x, axis, "softmax")
    nisa = _isa()
    if len(axes) == x.ndim - 1:
        x2 = _flat2d(x)
        p = x.shape[0]
        neg_max = _new((p, 1), _dt.float32, "softmax")
        nisa.tensor_reduce(dst=neg_max, op=maximum, data=x2, axis=(1,), negate=True, keepdims=True)
        e = _new(x2.shape, _dt.float32, "softmax")
        total = _new((p, 1), _dt.float32, "softmax")
        nisa.activation(
            dst=e,
            op=exp,
            data=x2,
            bias=neg_max,
            reduce_op=add,
            reduce_res=total,
            reduce_cmd=nisa.reduce_cmd.reset_reduce,
        )
        inv = _new((p, 1), _dt.float32, "softmax")
        nisa.reciprocal(dst=inv, data=total)
        out = _new(x.shape, dtype or x.dtype, "softmax")
        nisa.tensor_scalar(dst=_flat2d(out), data=e, op0=multiply, operand0=inv)
        return out
    kshape = _reduced_shape(x, axes, True)
    neg_max = _reduce("softmax", maximum, x, axes, _dt.float32, True, negate=True)
    shifted = _new(x.shape, _dt.float32, "softmax")
    nisa.tensor_tensor(dst=shifted, data1=x, data2=_expand(neg_max, x.shape), op=add)
    e = _new(x.shape, _dt.float32, "softmax")
    nisa.activation(dst=e, op=exp, data=shifted)
    total = _reduce("softmax", add, e, axes, _dt.float32, True)
    inv = _new(kshape, _dt.float32, "softmax")
    nisa.reciprocal(dst=inv, data=total)
    out = _new(x.shape, dtype or x.dtype, "softmax")
    nisa.tensor_tensor(dst=out, data1=e, data2=_expand(inv, x.shape), op=multiply)
    return out


def _expand(t: NkiTensor, shape: tuple[int, ...]) -> NkiTensor:
    for d, (have, want) in enumerate(zip(t.shape, shape, strict=True)):
        if have != want:
            t = t.broadcast(d, want)
    return t


@_api
def rms_norm(
    x: Any,
    w: Any,
    axis: Any,
    n: int,
    epsilon: float = 1e-6,
    dtype: Any = None,
    compute_dtype: Any = None,
) -> NkiTensor:
    """x / sqrt(sum(x**2) / n + epsilon) * w over trailing free axes.

    Lowering: activation(square, accumulate the row sum) -> tensor_scalar(* 1/n, + eps)
    -> activation(rsqrt) -> scalar_tensor_tensor(x * r * w).
    """
    x = _tile(x, "rms_norm")
    w = _tile(w, "rms_norm", "w")
    axes = _axes(x, axis, "rms_norm")
    if len(axes) != x.ndim - 1:
        raise ConstraintError(f"nl.rms_norm: axis {axis} must cover every free axis of the tile")
    nisa = _isa()
    x2 = _flat2d(x)
    p = x.shape[0]
    sq = _new(x2.shape, compute_dtype or _dt.float32, "rms_norm")
    ss = _new((p, 1), _dt.float32, "rms_norm")
    nisa.activation(
        dst=sq,
        op=square,
        data=x2,
        reduce_op=add,
        reduce_res=ss,
        reduce_cmd=nisa.reduce_cmd.reset_reduce,
    )
    nisa.tensor_scalar(
        dst=ss, data=ss, op0=multiply, operand0=1.0 / float(n), op1=add, operand1=float(epsilon)
    )
    r = _new((p, 1), _dt.float32, "rms_norm")
    nisa.activation(dst=r, op=rsqrt, data=ss)
    out = _new(x.shape, dtype or x.dtype, "rms_norm")
    if tuple(w.shape) == tuple(x.shape):
        nisa.scalar_tensor_tensor(
            dst=_flat2d(out), data=x2, op0=multiply, operand0=r, op1=multiply, operand1=_flat2d(w)
        )
    elif _col(w) and w.shape[0] == p:
        nisa.tensor_scalar(
            dst=_flat2d(out), data=x2, op0=multiply, operand0=r, op1=multiply, operand1=w
        )
    else:
        raise ConstraintError(
            f"nl.rms_norm: w has shape {list(w.shape)}; it must match x "
            f"{list(x.shape)} (or be a (P, 1) per-partition weight)"
        )
    return out
