"""Beta-1 nl reductions and composites: sum, max, min, prod, all, mean, var, softmax, rms_norm,
loop_reduce.

Reductions run tensor_reduce over trailing free axes; other free axes are first moved to the
back by a permuted access pattern (B1 reduces any free axes, e.g. `axis=[2, 4]` in average
pooling). Without keepdims the reduced axes disappear, but an on-chip tile keeps at least two
dimensions, so a row reduction of (P, F) is (P, 1), ready to combine with (P, F).
"""

from __future__ import annotations

import ast
import linecache
import sys
import textwrap
from typing import Any

from trnsim import dtypes as dt
from trnsim.compat.neuronxcc.nki import _math as M
from trnsim.compat.neuronxcc.nki._emit import single, take_pending
from trnsim.compat.neuronxcc.nki._index import Predicate, as_mask
from trnsim.compat.neuronxcc.nki._state import api, here
from trnsim.compat.neuronxcc.nki._tensor import tensor
from trnsim.errors import ConstraintError, UnsupportedError
from trnsim.semantics._ops import op_name

REDUCE_OPS = {
    "sum": "add",
    "max": "maximum",
    "min": "minimum",
    "prod": "multiply",
    "all": "logical_and",
}


def _axes(axis: Any, ndim: int, api_name: str) -> tuple[int, ...]:
    items = list(axis) if isinstance(axis, (tuple, list)) else [axis]
    out = []
    for a in items:
        a = int(a)
        a = a + ndim if a < 0 else a
        if not 0 < a < ndim:
            raise ConstraintError(
                f"{api_name}: axis {a} is not a free axis of a {ndim}-D tile "
                "(axis 0 is the partition axis)"
            )
        out.append(a)
    if len(set(out)) != len(out):
        raise ConstraintError(f"{api_name}: repeated axis in {items}")
    return tuple(sorted(out))


def _out_shape(shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if k in axes else n for k, n in enumerate(shape))
    kept = tuple(n for k, n in enumerate(shape) if k not in axes)
    return kept + (1,) * max(0, 2 - len(kept))


def reduce(
    op: str,
    x: Any,
    axis: Any,
    *,
    dtype: Any = None,
    mask: Any = None,
    keepdims: bool = False,
    negate: bool = False,
    api_name: str = "",
) -> tensor:
    """A pending tensor_reduce of x over any free axes."""
    x = M.tile(x, api_name, "x")
    axes = _axes(axis, x.ndim, api_name)
    kept = [k for k in range(x.ndim) if k not in axes]
    perm = tuple(kept) + axes
    data = x if perm == tuple(range(x.ndim)) else x.permuted(perm)
    out_shape = _out_shape(tuple(x.shape), axes, keepdims)
    default = dt.bool_ if op == "logical_and" else x.dtype
    dst_axes = (
        tuple(kept) + (None,) * (len(out_shape) - len(kept))
        if not keepdims
        else tuple(k if k not in axes else None for k in range(x.ndim))
    )
    return single(
        "tensor_reduce",
        shape=out_shape,
        dtype=M.out_dtype(dtype, default),
        domain=tuple(x.shape),
        inputs={"data": data},
        axes={"data": perm},
        attrs={
            "op": op,
            "axis": tuple(range(len(kept), x.ndim)),
            "negate": negate,
            "keepdims": keepdims,
        },
        out_axes=dst_axes,
        mask=mask,
        label=api_name,
    )


def _reduction(name: str) -> Any:
    op = REDUCE_OPS[name]

    def fn(
        x: Any,
        axis: Any,
        *,
        dtype: Any = None,
        mask: Any = None,
        keepdims: bool = False,
        **kwargs: Any,
    ) -> tensor:
        return reduce(op, x, axis, dtype=dtype, mask=mask, keepdims=keepdims, api_name=f"nl.{name}")

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"{name} over free axes `axis` (Vector engine tensor_reduce)."
    wrapped = api(f"nl.{name}")(fn)
    wrapped.nki_name = op  # type: ignore[attr-defined]
    return wrapped


FUNCTIONS = {n: _reduction(n) for n in REDUCE_OPS}


def _scaled(t: tensor, factor: float, odt: Any, mask: Any, offset: float | None = None) -> tensor:
    inputs: dict[str, Any] = {"data": t, "operand0": factor}
    attrs: dict[str, Any] = {
        "op0": "multiply",
        "reverse0": False,
        "op1": None,
        "operand1": None,
        "reverse1": False,
    }
    if offset is not None:
        inputs["operand1"] = offset
        attrs.update(op1="add")
        attrs.pop("operand1")
    return single(
        "tensor_scalar",
        shape=tuple(t.shape),
        dtype=odt,
        inputs=inputs,
        attrs=attrs,
        mask=mask,
        label="scale",
    )


@api("nl.mean")
def mean(
    x: Any, axis: Any, *, dtype: Any = None, mask: Any = None, keepdims: bool = False, **kwargs: Any
) -> tensor:
    """Mean over free axes: an fp32 sum, then a multiply by 1/n (n: the elements the mask
    keeps along the reduced axes)."""
    x = M.tile(x, "nl.mean", "x")
    axes = _axes(axis, x.ndim, "nl.mean")
    n = _masked_count(as_mask(mask), tuple(x.shape), axes)
    s = M.now(
        reduce("add", x, axes, dtype=dt.float32, mask=mask, keepdims=keepdims, api_name="nl.mean")
    )
    default = x.dtype if x.dtype.is_float else dt.float32
    return _scaled(s, 1.0 / n, M.out_dtype(dtype, default), None)


def _masked_count(mask: Any, shape: tuple[int, ...], axes: tuple[int, ...]) -> int:
    """How many elements along `axes` a (single-axis) mask keeps in every row."""
    box = [(0, n) for n in shape]
    if isinstance(mask, Predicate):
        box, residual = mask.box(shape)
        for e, _ in residual:
            _, coefs = e.aligned(len(shape))
            if any(coefs[a] for a in axes):
                raise UnsupportedError(
                    "nl.mean / nl.var: a mask over several axes (such as i_p >= i_f) keeps a "
                    "different number of elements per row; compute nl.sum and divide by the "
                    "per-row count instead"
                )
    n = 1
    for a in axes:
        n *= max(box[a][1] - box[a][0], 0)
    return max(n, 1)


@api("nl.var")
def var(
    x: Any, axis: Any, *, dtype: Any = None, mask: Any = None, keepdims: bool = False, **kwargs: Any
) -> tensor:
    """Population variance over free axes: mean((x - mean(x))^2), in fp32."""
    x = M.tile(x, "nl.var", "x")
    axes = _axes(axis, x.ndim, "nl.var")
    mu = M.now(mean(x, axes, dtype=dt.float32, mask=mask, keepdims=True))
    centered = M.now(M.binary("subtract", x, mu, dtype=dt.float32, mask=mask))
    sq = M.now(M.activation("square", centered, dtype=dt.float32, mask=mask))
    default = x.dtype if x.dtype.is_float else dt.float32
    return mean(sq, axes, dtype=M.out_dtype(dtype, default), mask=mask, keepdims=keepdims)


@api("nl.softmax")
def softmax(
    x: Any,
    axis: Any,
    *,
    dtype: Any = None,
    compute_dtype: Any = None,
    mask: Any = None,
    **kwargs: Any,
) -> tensor:
    """exp(x - max) / sum(exp(x - max)) over `axis`: max reduce, exp with a per-partition bias
    (Scalar Engine), sum reduce, reciprocal, multiply."""
    x = M.tile(x, "nl.softmax", "x")
    axes = _axes(axis, x.ndim, "nl.softmax")
    cdt = M.out_dtype(compute_dtype, dt.float32)
    odt = M.out_dtype(dtype, x.dtype)
    mx = M.now(
        reduce(
            "maximum",
            x,
            axes,
            dtype=dt.float32,
            mask=mask,
            keepdims=True,
            negate=True,
            api_name="nl.softmax",
        )
    )
    if axes == tuple(range(1, x.ndim)):  # row softmax: -max is a per-partition bias
        e = M.now(
            M.activation(
                "exp", x, dtype=cdt, mask=mask, bias=mx.reshape((x.shape[0], 1)), api="nl.softmax"
            )
        )
    else:
        shifted = M.now(M.binary("add", x, mx, dtype=cdt, mask=mask))
        e = M.now(M.activation("exp", shifted, dtype=cdt, mask=mask, api="nl.softmax"))
    s = M.now(
        reduce("add", e, axes, dtype=dt.float32, mask=mask, keepdims=True, api_name="nl.softmax")
    )
    r = M.now(
        M.single(
            "reciprocal",
            shape=tuple(s.shape),
            dtype=dt.float32,
            inputs={"data": s},
            mask=mask,
            label="nl.softmax",
        )
    )
    return M.binary("multiply", e, r, dtype=odt, mask=mask)


@api("nl.rms_norm")
def rms_norm(
    x: Any,
    w: Any,
    axis: Any,
    n: Any,
    epsilon: float = 1e-6,
    *,
    dtype: Any = None,
    compute_dtype: Any = None,
    mask: Any = None,
    **kwargs: Any,
) -> tensor:
    """x / sqrt(sum(x^2) / n + epsilon) * w over `axis`."""
    x = M.tile(x, "nl.rms_norm", "x")
    axes = _axes(axis, x.ndim, "nl.rms_norm")
    cdt = M.out_dtype(compute_dtype, dt.float32)
    sq = M.now(M.activation("square", x, dtype=cdt, mask=mask, api="nl.rms_norm"))
    ss = M.now(
        reduce("add", sq, axes, dtype=dt.float32, mask=mask, keepdims=True, api_name="nl.rms_norm")
    )
    ms = M.now(_scaled(ss, 1.0 / float(n), dt.float32, mask, offset=float(epsilon)))
    r = M.now(M.activation("rsqrt", ms, dtype=dt.float32, mask=mask, api="nl.rms_norm"))
    y = M.now(M.binary("multiply", x, r, dtype=cdt, mask=mask))
    return M.binary("multiply", y, w, dtype=M.out_dtype(dtype, x.dtype), mask=mask)


# ---------------------------------------------------------------- loop_reduce


@api("nl.loop_reduce")
def loop_reduce(
    x: Any, op: Any, loop_indices: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any
) -> tensor:
    """b = nl.loop_reduce(x, op, [i]) is b = op(b, x) with b the assignment target: the
    destination is also op's other input (an accumulation, allowed in affine_range)."""
    x = M.tile(x, "nl.loop_reduce", "x")
    opname = op_name(op, "op")
    target = _assignment_target(sys._getframe(2))
    if target is None:
        raise UnsupportedError(
            "nl.loop_reduce: its result must be assigned to a tile "
            "variable (b = nl.loop_reduce(x, op, [i]) or b[...] = ...); "
            "the destination is also the reduction's input",
            here()[0],
        )
    acc = M.tile(target, "nl.loop_reduce", "destination")
    pending = M.binary(opname, acc, x, dtype=dtype or acc.dtype, mask=mask)
    p = take_pending(pending)
    p.emit(acc, "accumulate")
    acc._inplace = True  # `b[...] = nl.loop_reduce(...)`: already written in place
    return acc


def _assignment_target(frame: Any) -> Any:
    """The current value of what the calling line assigns to: the variable (`b = ...`), or
    the access it subscripts (`b[i, nl.arange(128)[:, None], 0] = ...`: one block of a
    block-dimension tensor), evaluated in the caller's frame."""
    node = _statement_at(frame.f_code.co_filename, frame.f_lineno)
    if node is None:
        return None
    targets = (
        node.targets
        if isinstance(node, ast.Assign)
        else [node.target]
        if isinstance(node, ast.AnnAssign)
        else []
    )
    for t in targets:
        if isinstance(t, ast.Name):
            return frame.f_locals.get(t.id)
        if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name):
            if t.value.id not in frame.f_locals:
                return None
            load = ast.Subscript(value=t.value, slice=t.slice, ctx=ast.Load())
            tree = ast.fix_missing_locations(ast.Expression(load))
            expr = compile(tree, frame.f_code.co_filename, "eval")
            return eval(expr, frame.f_globals, frame.f_locals)  # the user's own target
    return None


def _statement_at(filename: str, lineno: int) -> Any:
    """The statement that starts on `lineno`, also when it continues over the next lines
    (`b[i] = nl.loop_reduce(\n x, op=np.add, ...)`, as AWS's flash attention backward
    writes it): the shortest run of lines from there that parses."""
    lines = []
    for k in range(lineno, lineno + 32):
        line = linecache.getline(filename, k)
        if not line:
            break
        lines.append(line)
        try:
            body = ast.parse(textwrap.dedent("".join(lines))).body
        except SyntaxError:
            continue
        return body[0] if body else None
    return None
