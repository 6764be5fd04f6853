"""Binding an op's arguments by schema name, and asking PyTorch's meta kernels what an op
returns (shapes, strides, dtypes, and the errors ATen raises) before a kernel runs."""

from __future__ import annotations

from typing import Any

import torch
from trnsim.backend.registry import HostOnly
from trnsim.backend.runtime import runtime


def bind(overload: Any, args: tuple, kwargs: dict) -> dict[str, Any]:
    """{schema argument name: value} of one call (defaults filled in)."""
    schema = overload._schema
    out: dict[str, Any] = {}
    for i, a in enumerate(schema.arguments):
        if i < len(args) and not a.kwarg_only:
            out[a.name] = args[i]
        elif a.name in kwargs:
            out[a.name] = kwargs[a.name]
        elif a.has_default_value():
            out[a.name] = a.default_value
        else:
            out[a.name] = None
    return out


def written(overload: Any) -> tuple[list[str], list[str]]:
    """(in-place argument names, out= argument names) of an overload."""
    inplace, outs = [], []
    for a in overload._schema.arguments:
        if a.alias_info is not None and a.alias_info.is_write:
            (outs if a.kwarg_only else inplace).append(a.name)
    return inplace, outs


def to_meta(x: Any, rt_name: str, empty_outs: bool = False) -> Any:
    if isinstance(x, torch.Tensor):
        if x.device.type == rt_name:
            if empty_outs:
                return torch.empty(0, dtype=x.dtype, device="meta")
            return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="meta")
        return x
    if isinstance(x, (list, tuple)) and any(isinstance(v, torch.Tensor) for v in x):
        return type(x)(to_meta(v, rt_name, empty_outs) for v in x)
    if isinstance(x, torch.device) and x.type == rt_name:
        return torch.device("meta")
    return x


def run_meta(overload: Any, args: tuple, kwargs: dict) -> Any:
    """The op on meta tensors: its results' metadata, or ATen's own error for bad inputs."""
    name = runtime().name
    _, outs = written(overload)
    tensor_args = _tensor_positions(overload)
    # A wrapped number (`t + 1.0`) reaches a Python kernel as the number. On meta it is a 0-d
    # tensor of the dtype that promotes as the wrapped number did: the other operands' dtype
    # when its category is not higher (a 0-d bf16 tensor + 1.0 stays bf16), else its
    # category's default; and every operand stays on meta.
    numbers = [i for i, a in enumerate(args) if i in tensor_args and
               isinstance(a, (bool, int, float))]
    margs = tuple(to_meta(a, name) for a in args)
    if numbers:
        margs = tuple(torch.tensor(a, dtype=_wrapped_dtype(a, margs), device="meta")
                      if i in numbers else a for i, a in enumerate(margs))
    mkwargs = {k: to_meta(v, name, empty_outs=k in outs) for k, v in kwargs.items()}
    try:
        return overload(*margs, **mkwargs)
    except NotImplementedError as e:  # no meta kernel: the op cannot be sized here
        raise HostOnly(f"no meta kernel ({str(e).splitlines()[0][:60]})") from None


def _wrapped_dtype(value: bool | int | float, operands: tuple) -> torch.dtype:
    tensors = [t for t in operands if isinstance(t, torch.Tensor)]
    if not tensors:
        return torch.tensor(value).dtype
    base = tensors[0].dtype
    for t in tensors[1:]:
        base = torch.promote_types(base, t.dtype)
    return torch.result_type(torch.empty(1, dtype=base, device="meta"), value)


_TENSOR_POSITIONS: dict[Any, frozenset[int]] = {}


def _tensor_positions(overload: Any) -> frozenset[int]:
    """Positions of Tensor arguments (the dispatcher hands wrapped scalars to Python kernels
    as numbers; the meta call needs them back as 0-d tensors)."""
    got = _TENSOR_POSITIONS.get(overload)
    if got is None:
        got = _TENSOR_POSITIONS[overload] = frozenset(
            i for i, a in enumerate(overload._schema.arguments) if str(a.type) == "Tensor")
    return got


def scalar_of(v: Any) -> Any:
    """Python scalars from 0-d CPU tensors (wrapped numbers); other values unchanged."""
    if isinstance(v, torch.Tensor) and v.device.type == "cpu" and v.dim() == 0:
        return v.item()
    return v


_INT32 = (-(2 ** 31), 2 ** 31)


def check_int64_range(t: torch.Tensor, what: str) -> None:
    """Kernels read int64 tensors by their low words: values must lie in int32 range."""
    if t.dtype != torch.int64 or t.numel() == 0:
        return
    h = runtime().host_views.of(t)
    lo, hi = int(h.min()), int(h.max())
    if lo < _INT32[0] or hi >= _INT32[1]:
        raise HostOnly(f"int64 {what} values beyond int32 range ({lo}..{hi})")
