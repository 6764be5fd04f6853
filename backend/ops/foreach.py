"""PyTorch's multi-tensor `_foreach_*` ops (what torch.optim's default foreach path calls): one
`pointwise_multi` launch per op over the whole list, as GPUs run one multi-tensor kernel.

Argument names map onto the pointwise table's operands: the second list (`other`, `scalar`,
`scalars`, `exponent`, `tensors1`, `weight(s)`) is the op's second operand; a ScalarList is a
per-tensor scalar. Ops the table does not serve run on the host (reference only).
"""

from __future__ import annotations

from typing import Any

import torch
from trnsim.backend import storage
from trnsim.backend.ops._common import launch
from trnsim.backend.ops._meta import bind, run_meta, scalar_of, written
from trnsim.backend.registry import REGISTRY, HostOnly, op, reference_only
from trnsim.backend.runtime import runtime
from trnsim.kernels.pointwise import ops as kernel_ops
from trnsim.kernels.pointwise import pointwise_multi

_FLOATS = (torch.float32, torch.bfloat16, torch.float16)
RENAMED = {"clamp_min": ("clamp", "min", {"max": None}), "clamp_max": ("clamp", "max",
                                                                      {"min": None})}


def _overloads() -> list[str]:
    names = []
    for full in torch._C._dispatch_get_all_op_names():
        if full.startswith("aten::_foreach_"):
            names.append(full.removeprefix("aten::"))
    return sorted(n for n in names if not n.endswith(".out"))


def _kernel_op(name: str) -> tuple[str, str | None, dict] | None:
    """(kernel op, its second operand's name, fixed attributes) of a foreach overload."""
    base = name.split(".")[0].removeprefix("_foreach_").removesuffix("_")
    if base in RENAMED:
        return RENAMED[base]
    if base in ("copy", "clone"):
        return "copy", None, {}
    table = kernel_ops()
    if base not in table or (name.endswith(".Tensor") and base in ("addcmul", "addcdiv")):
        return None
    args = table[base]
    return base, (args[1] if len(args) > 1 else None), {}


def make(name: str, kop: str, second: str | None, fixed: dict) -> Any:
    from trnsim.backend.dispatch import resolve

    overload = resolve(f"aten::{name}")
    inplace, _ = written(overload)
    operands = kernel_ops()[kop]

    def run(*args: Any, **kwargs: Any) -> Any:
        meta = run_meta(overload, args, kwargs)
        b = bind(overload, args, kwargs)
        lists: dict[str, list] = {}
        attrs = dict(fixed)
        n = None
        positional = [a.name for a in overload._schema.arguments if not a.kwarg_only]
        for arg, value in b.items():
            if arg in ("memory_format", "non_blocking"):
                continue
            if kop == "copy" and arg == "self" and "src" in b:
                continue  # _foreach_copy_: self is only written
            if arg == "src":
                kname = "input"
            elif arg in positional:  # operands by position; past them, the op's scalar
                i = positional.index(arg)
                kname = operands[i] if i < len(operands) else "value"
                if i == 1 and second is not None:
                    kname = second
            else:
                kname = arg
            if (kname != operands[0] and isinstance(value, (list, tuple)) and value
                    and all(isinstance(v, torch.Tensor) and v.device.type == "cpu"
                            and v.dim() == 0 for v in value)):
                # CPU 0-d tensors beside device tensors are scalars (as ATen takes them; a
                # compiled torch.optim step divides by bias corrections held this way)
                attrs[kname] = [scalar_of(v) for v in value]
            elif isinstance(value, (list, tuple)) and value and isinstance(value[0],
                                                                           torch.Tensor):
                lists[kname] = list(value)
                n = len(value)
            elif isinstance(value, torch.Tensor):  # one tensor for every element
                lists[kname] = value
            else:
                attrs[kname] = [scalar_of(v) for v in value] if isinstance(value, (list, tuple)) \
                    else scalar_of(value)
        if n is None:
            raise HostOnly("no tensor list")
        if kop == "sub" and any(isinstance(v, bool) or (isinstance(v, list) and any(
                isinstance(x, bool) for x in v)) for v in attrs.values()):
            raise RuntimeError("Subtraction, the `-` operator, with a bool tensor is not "
                               "supported. If you are trying to invert a mask, use the `~` or "
                               "`logical_not()` operator instead.")
        if inplace:
            outs = list(b[inplace[0]])
        else:
            outs = [storage.empty_strided(runtime(), m.shape, m.stride(), m.dtype) for m in meta]
        ins = [lists[k] if isinstance(lists[k], list) else [lists[k]] * n
               for k in operands if k in lists]
        for t in (*outs, *(t for lst in ins for t in lst)):
            if t.dtype not in _FLOATS:
                raise HostOnly(f"{t.dtype} operand")
        keep = [i for i, t in enumerate(outs) if t.numel()]
        if keep:
            launch(pointwise_multi, [outs[i] for i in keep], *[[lst[i] for i in keep]
                                                            for lst in ins],
                   aten_op=f"aten::{name.split('.')[0]}", op=kop,
                   **{k: ([v[i] for i in keep] if isinstance(v, list) else v)
                      for k, v in attrs.items()})
        return None if inplace else outs

    run.__name__ = name
    return run


def _zero(self):
    from trnsim.backend.ops.pointwise import _fill

    for t in self:
        _fill(t, 0)


def _zeros(self):
    from trnsim.backend.ops.pointwise import _fill

    return [_fill(storage.empty_strided(runtime(), t.shape, t.stride(), t.dtype), 0)
            for t in self]


op("_foreach_zero_", kernels="fill", group="foreach")(_zero)
op("_foreach_zero", kernels="fill", group="foreach")(_zeros)
for _name in _overloads():
    if _name in REGISTRY:
        continue
    _k = _kernel_op(_name)
    if _k is not None:
        op(_name, kernels="pointwise_multi", group="foreach")(make(_name, *_k))
reference_only(*(n for n in _overloads() if n not in REGISTRY), group="foreach")
