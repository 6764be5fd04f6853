"""Lowering of Beta-1 element-wise math to instructions (shared by nl.* and tile operators).

binary(op, x, y): a scalar or a per-partition (P, 1) operand becomes tensor_scalar; two tiles
become tensor_tensor on stride-0 broadcast views of the NumPy-broadcast shape, aligned on the
partition axis (a reduced (P, 1) tile combines with (P, F)). nl.* functions broadcast a (1, F)
operand across partitions through a DMA copy (costly, as B1 documents); the tile operators
(+, -, ...) do not (err_num_partition_mismatch). Result dtypes follow the B1 promotion table
(trnsim.dtype_promotion, nki-api.md §5A.3). Activation-table functions run on the Scalar Engine
(`activation`); others are Vector-engine composites.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from trnsim import dtypes as dt
from trnsim.compat.neuronxcc.nki._emit import make_pending, run, single
from trnsim.compat.neuronxcc.nki._errors import b1_error
from trnsim.compat.neuronxcc.nki._index import IndexExpr, as_mask
from trnsim.compat.neuronxcc.nki._state import here
from trnsim.compat.neuronxcc.nki._tensor import tensor
from trnsim.dtype_promotion import promote, promote_scalar
from trnsim.errors import ConstraintError

SCALARS = (int, float, bool, np.integer, np.floating, np.bool_)
COMPARISONS = (
    "equal",
    "not_equal",
    "greater",
    "greater_equal",
    "less",
    "less_equal",
    "logical_and",
    "logical_or",
    "logical_xor",
)
UNARY_TS = ("abs", "invert", "logical_not", "reciprocal", "rsqrt", "square", "relu")


def op_label(op: Any) -> str:
    """The name of an op given as nl.exp, np.exp, 'exp' or an nl function."""
    if isinstance(op, str):
        return op
    name = getattr(op, "nki_name", None) or getattr(op, "__name__", None)
    if not isinstance(name, str):
        raise ConstraintError(f"op={op!r} is not an operator")
    return name


def tile(x: Any, api: str, name: str) -> tensor:
    """x as an on-chip tile operand (materialized, partition axis first)."""
    if isinstance(x, IndexExpr):
        raise ConstraintError(
            f"{api}: operand '{name}' is an index expression; materialize "
            "it with nisa.iota(expr, dtype) first"
        )
    if not isinstance(x, tensor):
        raise ConstraintError(
            f"{api}: operand '{name}' must be a tile, got {type(x).__name__} {x!r}"
        )
    return x._ready().as_tile(api, name)


def scalar_value(x: Any) -> float | int:
    if isinstance(x, (bool, np.bool_)):
        return int(x)
    if isinstance(x, (np.integer, int)):
        return int(x)
    return float(x)


def out_dtype(dtype: Any, default: dt.DType) -> dt.DType:
    if dtype is None:
        return default
    from trnsim.compat.neuronxcc.nki._create import resolve_dtype

    return resolve_dtype(dtype)


def free_elems(shape: tuple[int, ...]) -> int:
    return int(math.prod(shape[1:]))


def aligned_shape(a: tuple[int, ...], b: tuple[int, ...], api: str) -> tuple[int, ...]:
    """Broadcast of two tile shapes aligned on the partition axis (trailing 1s pad)."""
    r = max(len(a), len(b))
    a2, b2 = a + (1,) * (r - len(a)), b + (1,) * (r - len(b))
    out = []
    for m, n in zip(a2, b2, strict=True):
        if m != n and 1 not in (m, n):
            raise b1_error(
                ConstraintError,
                "err_param_shape_incompatible_with_numpy",
                f"{api}: operand shapes {list(a)} and {list(b)} could not be broadcast together",
            )
        out.append(max(m, n))
    return tuple(out)


def padded(t: tensor, rank: int) -> tensor:
    while t.ndim < rank:
        t = t.with_axis(t.ndim)
    return t


def partition_broadcast(t: tensor, parts: int) -> tensor:
    """A (1, ...) tile copied across `parts` partitions (a DMA broadcast into a fresh tile)."""
    from trnsim.compat.neuronxcc.nki import _copy, _create

    out = _create.allocate((parts, *t.shape[1:]), t.dtype, "sbuf", "bcast")
    _copy.copy_into(out, t, what="partition broadcast")
    return out


def to_sbuf(t: tensor) -> tensor:
    """A PSUM tile copied to a fresh SBUF tile (for operands that must not be in PSUM)."""
    from trnsim.compat.neuronxcc.nki import _copy, _create

    out = _create.allocate(t.shape, t.dtype, "sbuf", "sb")
    _copy.copy_into(out, t)
    return out


def binary(
    op: str,
    x: Any,
    y: Any,
    *,
    dtype: Any = None,
    mask: Any = None,
    dst_dtype: dt.DType | None = None,
    operator_form: bool = False,
) -> tensor:
    """x <op> y as a pending tile (tensor_scalar or tensor_tensor)."""
    api = f"nl.{op}"
    xt, yt = isinstance(x, tensor), isinstance(y, tensor)
    if not xt and not yt:
        raise ConstraintError(f"{api}: at least one operand must be a tile, got {x!r}, {y!r}")
    if xt:
        x = tile(x, api, "x")
    if yt:
        y = tile(y, api, "y")
    if not (xt and yt):
        t, s, rev = (x, y, False) if xt else (y, x, True)
        if not isinstance(s, SCALARS):
            raise ConstraintError(f"{api}: operand {s!r} is neither a tile nor a number")
        default = dt.bool_ if op in COMPARISONS else promote_scalar(t.dtype, s)
        return _tensor_scalar(
            op, t, scalar_value(s), rev, out_dtype(dtype, dst_dtype or default), mask
        )
    if operator_form and x.shape[0] != y.shape[0]:
        raise b1_error(
            ConstraintError,
            "err_num_partition_mismatch",
            f"number of partitions (dimension 0 size of a tile) mismatch in "
            f"parameters (x{list(x.shape)}, y{list(y.shape)}) of '{op}' (tile "
            "operators do not broadcast along the partition axis; use nl."
            f"{op}(x, y) or broadcast_to)",
        )
    shape = aligned_shape(tuple(x.shape), tuple(y.shape), api)
    x, y = padded(x, len(shape)), padded(y, len(shape))
    if x.shape[0] != shape[0]:
        x = partition_broadcast(x, shape[0])
    if y.shape[0] != shape[0]:
        y = partition_broadcast(y, shape[0])
    default = dt.bool_ if op in COMPARISONS else promote(x.dtype, y.dtype)
    odt = out_dtype(dtype, dst_dtype or default)
    full = free_elems(shape)
    if full > 1 and free_elems(y.shape) == 1:
        return _tensor_scalar(op, x.broadcast_view(shape), y, False, odt, mask)
    if full > 1 and free_elems(x.shape) == 1:
        return _tensor_scalar(op, y.broadcast_view(shape), x, True, odt, mask)
    if x.space == "psum" and y.space == "psum":
        y = to_sbuf(y)
    return single(
        "tensor_tensor",
        shape=shape,
        dtype=odt,
        inputs={"data1": x.broadcast_view(shape), "data2": y.broadcast_view(shape)},
        attrs={"op": op},
        mask=mask,
        label=api,
    )


def _tensor_scalar(
    op: str, data: tensor, operand: Any, reverse: bool, odt: dt.DType, mask: Any, engine: Any = None
) -> tensor:
    if isinstance(operand, tensor):  # a (P, 1) operand: keep it 2-D
        operand = operand.reshape((operand.shape[0], 1)) if operand.ndim != 2 else operand
    return single(
        "tensor_scalar",
        shape=tuple(data.shape),
        dtype=odt,
        engine=engine,
        inputs={"data": data, "operand0": operand},
        attrs={"op0": op, "reverse0": reverse, "op1": None, "operand1": None, "reverse1": False},
        mask=mask,
        label=f"nl.{op}",
    )


def unary_vector(op: str, x: Any, *, dtype: Any = None, mask: Any = None) -> tensor:
    """A Vector-engine unary op (tensor_scalar with a unary op0)."""
    x = tile(x, f"nl.{op}", "x")
    default = dt.bool_ if op == "logical_not" else x.dtype
    return _tensor_scalar(op, x, None, False, out_dtype(dtype, default), mask)


def activation(
    op: str,
    x: Any,
    *,
    dtype: Any = None,
    mask: Any = None,
    bias: Any = None,
    scale: Any = 1.0,
    api: str | None = None,
) -> tensor:
    """op(x * scale + bias) on the Scalar Engine."""
    api = api or f"nl.{op}"
    x = tile(x, api, "x")
    inputs: dict[str, Any] = {"data": x, "scale": scale}
    if bias is not None:
        inputs["bias"] = bias
    return single(
        "activation",
        shape=tuple(x.shape),
        dtype=out_dtype(dtype, x.dtype),
        inputs=inputs,
        attrs={"op": op},
        mask=mask,
        label=api,
    )


# ---------------------------------------------------------------- eager helpers


def fresh(shape: tuple[int, ...], dtype: Any, buffer: str = "sbuf", name: str = "tmp") -> tensor:
    from trnsim.compat.neuronxcc.nki import _create

    return _create.allocate(shape, dtype, buffer, name)


def now(t: tensor) -> tensor:
    """Materialize a pending intermediate right away (composites)."""
    return t._ready()


def composite(
    shape: tuple[int, ...],
    dtype: dt.DType,
    steps: Callable[[tensor, str], None],
    label: str,
    buffer: str = "sbuf",
) -> tensor:
    """A pending result produced by several instructions (steps(dst, mode) issues them)."""
    return make_pending(shape, dtype, buffer, steps, loc=here()[0], label=label)


def range_reduced(x: tensor, offset: float, mask: Any) -> tensor:
    """(x + offset + pi) mod 2pi - pi in fp32: x + offset brought into [-pi, pi)."""
    loc, loops = here()
    m = as_mask(mask)
    out = fresh(tuple(x.shape), dt.float32, name="range")
    two_pi = 2 * math.pi
    run(
        "tensor_scalar",
        None,
        domain=tuple(x.shape),
        outputs={"dst": (out, None)},
        inputs={"data": x, "operand0": offset + math.pi, "operand1": two_pi},
        attrs={"op0": "add", "reverse0": False, "op1": "mod", "reverse1": False},
        mask=m,
        loc=loc,
        loops=loops,
    )
    run(
        "tensor_scalar",
        None,
        domain=tuple(x.shape),
        outputs={"dst": (out, None)},
        inputs={"data": out, "operand0": -math.pi},
        attrs={"op0": "add", "reverse0": False, "op1": None, "operand1": None, "reverse1": False},
        mask=m,
        loc=loc,
        loops=loops,
    )
    return out


def rounding(kind: str, x: Any, *, dtype: Any = None, mask: Any = None) -> tensor:
    """floor / ceil / trunc: x - (x mod 1) style Vector composites (fp32)."""
    api = f"nl.{kind}"
    x = tile(x, api, "x")
    odt = out_dtype(dtype, x.dtype)
    loc, loops = here()
    m = as_mask(mask)
    shape = tuple(x.shape)

    def steps(dst: tensor, mode: str) -> None:
        frac = fresh(shape, dt.float32, name="frac")
        # floor: x - mod(x, 1) (mod takes the divisor's sign); trunc: x - fmod(x, 1);
        # ceil: x + mod(-x, 1)
        op, sign = {"floor": ("mod", 1.0), "trunc": ("fmod", 1.0), "ceil": ("mod", -1.0)}[kind]
        run(
            "tensor_scalar",
            None,
            domain=shape,
            outputs={"dst": (frac, None)},
            inputs={"data": x, "operand0": sign, "operand1": 1.0},
            attrs={"op0": "multiply", "reverse0": False, "op1": op, "reverse1": False},
            mask=m,
            loc=loc,
            loops=loops,
        )
        run(
            "tensor_tensor",
            None,
            domain=shape,
            outputs={"dst": (dst, None)},
            inputs={"data1": x, "data2": frac},
            attrs={"op": "subtract" if kind != "ceil" else "add"},
            mask=m,
            loc=loc,
            loops=loops,
            rmw=mode == "accumulate",
        )

    return composite(shape, odt, steps, api)
