"""Pointwise results computed straight into HBM (the host path's lean form).

A pointwise op's result geometry (shape, strides, dtype) follows from its arguments'
geometries and the types of its non-tensor arguments, never from values (a reduction's
also from its dims' values). The first call of
a signature runs the functional op on the host and `record`s the result's geometry; later
calls `run` the op's out= overload over the HBM alias of a device result allocated first:
no host buffer, no copy (a 1024x1024 add then costs what the CPU's costs).

Only ops whose result shape follows from argument shapes and values (pointwise, reduction,
and a few listed: matmuls, softmax), that return a fresh tensor, and whose overload packet
has an out= overload with the same arguments and a CPU kernel of its own, take this path
(`out_overload`)."""

from __future__ import annotations

from typing import Any

import torch
from trnsim.backend import storage
from trnsim.backend.runtime import Runtime

_Tensor = torch.Tensor
_OUT_OF: dict[Any, Any] = {}  # functional overload -> its out= overload, or None
_GEOMETRY: dict[tuple, tuple] = {}  # signature -> (shape, strides, dtype, numel)
_LIMIT = 8192  # signatures kept (the table is cleared when it would grow past this)
_BY_TYPE = (bool, int, float, complex)  # a pointwise op's result follows their type only
# Beyond pointwise and reduction ops: ops whose result shape follows their arguments' shapes.
_STATIC_SHAPES = frozenset({
    torch.ops.aten.mm.default, torch.ops.aten.bmm.default, torch.ops.aten.addmm.default,
    torch.ops.aten._softmax.default, torch.ops.aten._log_softmax.default,
})


class _Defined:
    """An op that ATen's CPU kernel defines as another op with fixed trailing arguments
    (relu is clamp_min(self, 0): ATen native/Activation.cpp), run through that op's out=."""

    def __init__(self, out_op: Any, extra: tuple):
        self.out_op, self.extra = out_op, extra

    def __call__(self, *args: Any, out: torch.Tensor, **kwargs: Any) -> Any:
        return self.out_op(*args, *self.extra, out=out, **kwargs)


# relu's out= overload is composite (a temporary and a copy); its CPU kernel is clamp_min.
_DEFINED_AS = {torch.ops.aten.relu.default: _Defined(torch.ops.aten.clamp_min.out, (0,))}


def out_overload(op: Any) -> Any:
    """The out= overload computing what pointwise `op` computes, or None."""
    try:
        return _OUT_OF[op]
    except KeyError:
        pass
    found = _DEFINED_AS.get(op)
    schema = getattr(op, "_schema", None)
    tags = getattr(op, "tags", ())
    if (found is None and schema is not None
            and (torch.Tag.pointwise in tags or torch.Tag.reduction in tags
                 or op in _STATIC_SHAPES)
            and torch.Tag.dynamic_output_shape not in tags
            and not any(a.alias_info is not None for a in schema.arguments)
            and not any(r.alias_info is not None for r in schema.returns)
            and len(schema.returns) == 1):
        want = [(a.name, str(a.type), a.kwarg_only) for a in schema.arguments]
        packet = getattr(torch.ops.aten, schema.name.split("::")[-1], None)
        for name in packet.overloads() if packet is not None else ():
            cand = getattr(packet, name)
            args = cand._schema.arguments
            outs = [a for a in args if a.kwarg_only and a.alias_info is not None
                    and a.alias_info.is_write]
            rest = [(a.name, str(a.type), a.kwarg_only) for a in args if a not in outs]
            if len(outs) == 1 and outs[0].name == "out" and rest == want and \
                    torch._C._dispatch_has_kernel_for_dispatch_key(cand.name(), "CPU"):
                # (a composite out= overload computes a temporary and copies: no gain)
                found = cand
                break
    _OUT_OF[op] = found
    return found


def signature(op: Any, args: tuple, kwargs: dict) -> tuple | None:
    """What the result geometry of `op(*args, **kwargs)` depends on; None if unhashable.
    A pointwise op's scalars count by type; other ops' arguments (dims, keepdim) by value."""
    key: list[Any] = [op]
    by_type = torch.Tag.pointwise in op.tags
    for a in (*args, *kwargs, *kwargs.values()):
        if isinstance(a, _Tensor):
            key.append((a.dtype, a.shape, a.stride(), a.is_cpu))
        elif isinstance(a, _BY_TYPE) and by_type:
            key.append(type(a))
        elif isinstance(a, (list, tuple)) and all(isinstance(x, int) for x in a):
            key.append((tuple, *a))
        elif a is None or isinstance(a, (*_BY_TYPE, str, torch.dtype)):
            key.append((type(a), a))
        else:
            return None
    return tuple(key)


def record(key: tuple | None, r: torch.Tensor) -> None:
    """Remember the geometry of the fresh contiguous result `r` of signature `key`."""
    if key is None:
        return
    if len(_GEOMETRY) >= _LIMIT:
        _GEOMETRY.clear()
    _GEOMETRY[key] = (r.shape, r.stride(), r.dtype, r.numel())


def run(rt: Runtime, views: storage.HostViews, out_op: Any, key: tuple | None,
        hargs: list, kwargs: dict) -> torch.Tensor | None:
    """The device result of a recorded signature, computed in place; None if not recorded."""
    geo = _GEOMETRY.get(key) if key is not None else None
    if geo is None:
        return None
    shape, stride, dtype, numel = geo
    out = storage.empty_contiguous(rt, shape, dtype, numel, stride)
    h = views.of(out)
    with torch._C._ExcludeDispatchKeyGuard(_EXCLUDED):
        out_op(*hargs, **kwargs, out=h)
    if h.shape != shape:  # cannot happen for the ops admitted; never let it pass silently
        raise RuntimeError(f"trnsim internal error: {out_op} resized its output from "
                           f"{list(shape)} to {list(h.shape)}")
    return out


# Below autograd and autocast, as every host call (host._EXCLUDED).
_EXCLUDED = torch._C.DispatchKeySet(torch._C.DispatchKey.AutogradCPU) | torch._C.DispatchKeySet(
    torch._C.DispatchKey.AutocastCPU)
