"""Beta-1 value-returning calls: pending results, masks, destinations, and instruction issue.

A B1 call such as `nl.exp(x)` does not know where its result goes until Python assigns it:
`t[...] = nl.exp(x)` writes into a pre-declared tile, `psum += nisa.nc_matmul(a, b)`
accumulates in PSUM, `y = nl.exp(x)` wants a fresh SBUF tile. So each call returns a
*pending* tensor holding an `emit(dst, mode)` closure. At most one result is pending per
program: any other front-end call (and every loop step) first materializes it into a fresh
tile, so instructions still run in program order. Assignment instead emits it straight into
the destination (no extra copy), as the B1 compiler does (assignment and `+=`: _assign).

`run` issues one instruction under a mask: the predicate's single-axis terms shrink every
operand to a rectangle (masked-out destination elements are untouched and never accessed); a
multi-axis term such as `i_p < i_f` runs the instruction on the bounding box and restores the
masked-out destination elements afterwards (values exact; the record shows the bounding box).
`issue` is the B1 sibling of trnsim.nki._isa_base._issue: explicit location and loop nest,
plus the affine_range dependency check and HBM write bookkeeping.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from trnsim import semantics as sem
from trnsim.compat.neuronxcc.nki import _spill
from trnsim.compat.neuronxcc.nki._errors import b1_error
from trnsim.compat.neuronxcc.nki._index import Predicate, as_mask
from trnsim.compat.neuronxcc.nki._indirect import DynamicAccess, IndirectAccess
from trnsim.compat.neuronxcc.nki._state import context, declaration, here
from trnsim.compat.neuronxcc.nki._tensor import Box, full_box, tensor
from trnsim.errors import ConstraintError, KernelError, SimulationWarning, UnsupportedError
from trnsim.memory import View
from trnsim.nki._isa_base import _engine_name
from trnsim.program import SourceLocation
from trnsim.spec import engine_access, instruction_specs, is_tensor

Axes = tuple[int | None, ...]


@dataclass
class Pending:
    """A result whose instruction(s) wait for a destination."""

    emit: Callable[[tensor, str], None]  # emit(dst, "write" | "accumulate")
    shape: tuple[int, ...]
    buffer: str  # where a fresh result is allocated: sbuf or psum
    loc: SourceLocation | None
    dst_spaces: tuple[str, ...] = ("sbuf", "psum")
    accumulates: bool = False  # can accumulate into a PSUM destination (nc_matmul)
    label: str = ""
    mask: Any = None  # the instruction's mask (a Predicate or False), over `domain`
    domain: tuple[int, ...] | None = None
    out_axes: Axes | None = None
    partition_offset: int = 0  # a fresh result starts here (a PE column tile's PSUM rows)
    dst_dtype: Any = None  # a destination must have this dtype (else: a fresh tile, then a cast)
    decl: Any = None  # the declaration a fresh result tile belongs to (_state.declaration)


# ---------------------------------------------------------------- pending results


def make_pending(
    shape: tuple[int, ...],
    dtype: Any,
    buffer: str,
    emit: Callable[[tensor, str], None],
    *,
    loc: SourceLocation | None,
    dst_spaces: tuple[str, ...] = ("sbuf", "psum"),
    accumulates: bool = False,
    label: str = "",
    mask: Any = None,
    domain: tuple[int, ...] | None = None,
    out_axes: Axes | None = None,
    partition_offset: int = 0,
    dst_dtype: Any = None,
) -> tensor:
    ctx, st = context(label or "nki")
    st.flush()
    t = tensor(None, None, None, (), (), tuple(int(n) for n in shape), dtype)
    t._pending = Pending(
        emit,
        t.shape,
        buffer,
        loc,
        dst_spaces,
        accumulates,
        label,
        mask,
        domain,
        out_axes,
        partition_offset,
        dst_dtype,
        declaration(ctx),
    )
    st.pending = t
    return t


def materialize(t: tensor) -> None:
    """Allocate a fresh tile for a pending result and run its instruction(s) into it."""
    p = t._pending
    if p is None:
        return
    _, st = context(p.label)
    if st.pending is t:
        st.pending = None
    t._pending = None
    from trnsim.compat.neuronxcc.nki import _create

    try:
        name = _create.target_name(p.loc, p.label or "tmp")
        off = p.partition_offset
        if off:  # the tile covers the partitions the hardware writes, [off, off + P)
            whole = _create.allocate((off + p.shape[0], *p.shape[1:]), t.dtype, p.buffer, name,
                                     decl=p.decl)
            fresh = whole[off : off + p.shape[0]]
        else:
            fresh = _create.allocate(p.shape, t.dtype, p.buffer, name=name, decl=p.decl)
    except KernelError as e:
        raise relocated(e, p.loc) from None
    _alias(t, fresh)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        p.emit(t, "write")
    for w in caught:  # attribute them to the line that made the call, not the one that flushed
        if p.loc is not None and issubclass(w.category, SimulationWarning):
            warnings.warn_explicit(w.message, w.category, p.loc.filename, p.loc.lineno)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def _alias(t: tensor, src: tensor) -> None:
    t._buf, t._base, t._pdim = src._buf, src._base, src._pdim
    t._consts, t._coefs, t._shape = src._consts, src._coefs, src._shape


def take_pending(value: Any) -> Pending | None:
    """Detach the pending instruction of `value` (so it can be emitted elsewhere)."""
    if not isinstance(value, tensor) or value._pending is None:
        return None
    _, st = context("assignment")
    if st.pending is value:
        st.pending = None
    p, value._pending = value._pending, None
    return p


# ---------------------------------------------------------------- one instruction


def single(
    opcode: str,
    *,
    shape: tuple[int, ...],
    dtype: Any,
    buffer: str = "sbuf",
    engine: Any = None,
    domain: tuple[int, ...] | None = None,
    inputs: Mapping[str, Any] | None = None,
    axes: Mapping[str, Axes] | None = None,
    attrs: Mapping[str, Any] | None = None,
    out: str = "dst",
    out_axes: Axes | None = None,
    mask: Any = None,
    accumulate_attr: str | None = None,
    extra_outputs: Mapping[str, tuple[Any, Axes | None]] | None = None,
    label: str = "",
    partition_offset: int = 0,
    exact_dtype: bool = False,
) -> tensor:
    """A pending result produced by one instruction writing operand `out` (and possibly
    `extra_outputs`, pre-declared tiles such as reduce_res); a fresh result tile starts at
    `partition_offset`. `exact_dtype`: the instruction writes only its own dtype, so a
    destination of another dtype receives it through a cast (B1 inserts one)."""
    loc, loops = here()
    mask = as_mask(mask)
    domain = tuple(shape if domain is None else domain)
    inputs, axes, attrs = dict(inputs or {}), dict(axes or {}), dict(attrs or {})
    spec = instruction_specs().get(opcode)
    spaces = (
        tuple(spec.operands[out].spaces)
        if spec is not None and out in spec.operands
        else ("sbuf", "psum")
    )
    eng = _engine_name(engine)
    if eng is None and spec is not None and len(spec.engines) == 1:
        eng = spec.engines[0]
    if eng is not None:  # the engine writes only some memories (TensorE: PSUM)
        spaces = tuple(s for s in spaces if s in engine_access().get(eng, {}).get("write", ()))

    def emit(dst: tensor, mode: str) -> None:
        a = dict(attrs)
        if accumulate_attr is not None:
            # `psum += matmul` is the auto rule (None): the first write to a PSUM location
            # overwrites, later ones add (nki-api.md §6 nc_matmul, "B1/B2 behaviour"); so a
            # `+=` into a PSUM tile made by nl.ndarray starts from the first product, as
            # AWS's attention tutorial (attn_fwd_v8a) relies on
            a[accumulate_attr] = None if mode == "accumulate" else False
        outputs = {out: (dst, out_axes), **dict(extra_outputs or {})}
        run(
            opcode,
            engine,
            domain=domain,
            outputs=outputs,
            inputs=inputs,
            axes=axes,
            attrs=a,
            mask=mask,
            loc=loc,
            loops=loops,
            rmw=mode == "accumulate",
        )

    return make_pending(
        shape,
        dtype,
        buffer,
        emit,
        loc=loc,
        dst_spaces=spaces,
        accumulates=accumulate_attr is not None,
        label=label or opcode,
        mask=mask,
        domain=domain,
        out_axes=out_axes,
        partition_offset=partition_offset,
        dst_dtype=dtype if exact_dtype else None,
    )


def _narrow(box: Box, axes: Axes | None, t: Any, domain: tuple[int, ...]) -> Box:
    if axes is None:
        if t.ndim == len(domain):
            axes = tuple(range(len(domain)))
        else:
            return full_box(t.shape)
    out = []
    for j, n in enumerate(t.shape):
        k = axes[j] if j < len(axes) else None
        out.append(box[k] if k is not None and n == domain[k] else (0, n))
    return out


def run(
    opcode: str,
    engine: Any,
    *,
    domain: tuple[int, ...],
    outputs: Mapping[str, tuple[Any, Axes | None]],
    inputs: Mapping[str, Any],
    axes: Mapping[str, Axes] | None = None,
    attrs: Mapping[str, Any] | None = None,
    mask: Predicate | bool | None = None,
    loc: SourceLocation | None = None,
    loops: tuple = (),
    rmw: bool = False,
) -> None:
    """Issue `opcode` over `domain` restricted by `mask` (see the module docstring)."""
    axes = axes or {}
    if mask is False:
        return
    if mask is None:
        box, residual = full_box(domain), []
    else:
        try:
            _check_mask_extent(mask, domain, opcode)
        except KernelError as e:
            raise relocated(e, loc) from None
        box, residual = mask.box(domain)
    if any(hi <= lo for lo, hi in box):
        return
    try:
        _, st = context(opcode)
        for value in (*inputs.values(), *(d for d, _ in outputs.values())):
            if isinstance(value, tensor) and value._buf is not None:
                st.check_scope(value._buf, value.name)
        operands: dict[str, Any] = {}
        for name, value in inputs.items():
            if isinstance(value, tensor):
                operands[name] = value.operand(_narrow(box, axes.get(name), value, domain), "read")
            elif isinstance(value, (IndirectAccess, DynamicAccess)):
                operands[name] = value.operand(_narrow(box, axes.get(name), value, domain))
            else:
                operands[name] = value
        restore = []
        spec = instruction_specs().get(opcode)
        for name, (dst, dst_axes) in outputs.items():
            ospec = spec.operands.get(name) if spec is not None else None
            reads = rmw or bool(residual) or (ospec is not None and ospec.access != "write")
            sub = _narrow(box, dst_axes, dst, domain)
            view = dst.operand(sub, "readwrite" if reads else "write") if isinstance(
                dst, tensor) else dst.operand(sub)
            operands[name] = view
            if residual:
                restore.append(_saved(view, mask, box, domain, opcode))
    except KernelError as e:
        raise relocated(e, loc) from None
    issue(opcode, engine, loc=loc, loops=loops, rmw=rmw, **operands, **dict(attrs or {}))
    for view, keep, old in restore:
        if old is not None:
            arr = view.array()
            arr[~keep] = old[~keep]


def _check_mask_extent(mask: Predicate, domain: tuple[int, ...], opcode: str) -> None:
    """A mask index (nl.arange / nl.mgrid) must range over the instruction's own iteration
    space: an index of another extent (say the contraction index of a matmul, whose result
    axes are M and N) would otherwise restrict an unrelated axis or nothing at all."""
    for e, _ in mask.terms:
        shape, coefs = e.aligned(len(domain))
        for k, (n, c) in enumerate(zip(shape, coefs, strict=True)):
            if c and n not in (1, domain[k]):
                raise b1_error(
                    ConstraintError,
                    "err_unsupported_expression_in_mask",
                    f"{opcode}: the mask's index on axis {k} ranges over {n} values but the "
                    f"instruction's iteration space is {list(domain)}; build the mask from "
                    "indices of the instruction's own tile (for nl.matmul / nc_matmul the "
                    "axes are the result's [M, N]: restrict the contraction by slicing the "
                    "operands instead)",
                )


def _saved(
    view: View, mask: Predicate, box: Box, domain: tuple[int, ...], opcode: str
) -> tuple[View, np.ndarray, np.ndarray | None]:
    shape = tuple(hi - lo for lo, hi in box)
    if tuple(view.shape) != shape:
        raise UnsupportedError(
            f"{opcode}: a mask over several axes (e.g. i_p < i_f) is "
            "simulated only when the destination spans the masked "
            f"iteration space; destination {list(view.shape)} vs domain "
            f"{list(shape)} (use nisa.affine_select)"
        )
    keep = mask.evaluate(shape, [lo for lo, _ in box])
    ctx, _ = context(opcode)
    return view, keep, view.read() if ctx.device.values else None


def relocated(e: KernelError, loc: SourceLocation | None) -> KernelError:
    """e located at `loc` (the line that created a deferred instruction), replacing the line
    where it happened to be materialized."""
    if loc is not None:
        e.loc = loc
        e.args = (e._render(),)
    return e


def issue(
    opcode: str,
    eng: Any = None,
    *,
    loc: SourceLocation | None,
    loops: tuple = (),
    rmw: bool = False,
    **kwargs: Any,
) -> None:
    """Check, execute and record one instruction at the user's line (B1 sibling of _issue)."""
    ctx, st = context(opcode)
    spec = instruction_specs().get(opcode)
    op_names = set(spec.operands) if spec is not None else set()
    operands = {k: v for k, v in kwargs.items() if k in op_names}
    attrs = {k: v for k, v in kwargs.items() if k not in op_names}
    chosen = _engine_name(eng)
    unknown = False
    if chosen is None and spec is not None:
        chosen = sem.default_engine(opcode, ctx.chip, operands, attrs)
        unknown = chosen is None
        chosen = chosen or spec.engines[0]
    reads: dict[str, View] = {}
    writes: dict[str, View] = {}
    if spec is not None:
        for k, v in operands.items():
            if is_tensor(v):
                acc = spec.operands[k].access
                if acc in ("read", "readwrite"):
                    reads[k] = v
                if acc in ("write", "readwrite"):
                    writes[k] = v
    frames = st.affine_frames()
    if frames and st.tracker is not None:
        st.tracker.check(frames, opcode, reads, writes, rmw, ctx.device.program, loc)
    index = len(ctx.device.program)
    try:
        recorded = ctx.core.issue(opcode, chosen or "vector", operands, attrs, loc=loc,
                                  loops=loops)
        recorded.engine_unknown = unknown
    except KernelError as e:
        raise e.with_loc(loc) from None
    except UnsupportedError as e:
        if e.loc is None and loc is not None:
            raise UnsupportedError(e.message, loc) from e
        raise
    _spill.advance(ctx, recorded, operands, attrs)
    if frames and st.tracker is not None:
        st.tracker.stamp(writes, index, rmw)
    for v in writes.values():
        if v.buffer.space == "hbm":
            v.buffer.last_write = index
            st.hbm_written.add(v.buffer)
            name = st.immutable.get(id(v.buffer))
            if name is not None:
                st.immutable_writes.append((name, loc))
