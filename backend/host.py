"""Running an ATen op with PyTorch's CPU kernels on host aliases of the device's bytes.

This is reference mode, the host fallback (TRNSIM_FALLBACK=cpu) and the kernel-mode path for
dtypes no engine has (float64, complex). Device tensors become CPU tensors over the same HBM
bytes (no copy); results that alias an argument come back as that device tensor (in-place and
out= ops) or as a device view of its storage; fresh results are copied into new device
tensors. Mixing devices is checked as CUDA checks it.
"""

from __future__ import annotations

from typing import Any

import torch
from trnsim.backend import host_direct, storage
from trnsim.backend.runtime import Runtime

_CPU = torch.device("cpu")


class DeviceMismatch(RuntimeError):
    pass


def check_devices(rt: Runtime, op: str, args: Any, kwargs: Any) -> None:
    """A CPU tensor with dimensions among a device op's tensors is an error, as on CUDA
    (0-d CPU tensors are scalars and allowed)."""
    for name, a in _tensors(args, kwargs):
        if a.device.type == "cpu" and a.dim() > 0:
            raise DeviceMismatch(
                f"Expected all tensors to be on the same device, but found at least two devices, "
                f"{rt.device} and cpu! (when checking argument '{name}' of {op}: a CPU tensor of "
                f"shape {list(a.shape)}; move it with .to('{rt.name}'))")
        if a.device.type not in ("cpu", rt.name, "meta"):
            raise DeviceMismatch(
                f"Expected all tensors to be on the same device, but found at least two devices, "
                f"{rt.device} and {a.device}! (argument '{name}' of {op})")


def _tensors(args: Any, kwargs: Any):
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor):
            yield f"#{i}", a
        elif isinstance(a, (list, tuple)):
            for j, x in enumerate(a):
                if isinstance(x, torch.Tensor):
                    yield f"#{i}[{j}]", x
    for k, a in kwargs.items():
        if isinstance(a, torch.Tensor):
            yield k, a
        elif isinstance(a, (list, tuple)):
            for j, x in enumerate(a):
                if isinstance(x, torch.Tensor):
                    yield f"{k}[{j}]", x


class HostCall:
    """One op call with its arguments mapped to the host (keeps the mapping for results)."""

    def __init__(self, rt: Runtime, views: storage.HostViews):
        self.rt = rt
        self.views = views
        self.pairs: list[tuple[torch.Tensor, torch.Tensor]] = []  # (device, host alias)

    def to_host(self, a: Any) -> Any:
        if isinstance(a, torch.Tensor):
            if a.device.type == self.rt.name:
                h = self.views.of(a)
                self.pairs.append((a, h))
                return h
            return a
        if isinstance(a, (list, tuple)) and a and any(isinstance(x, torch.Tensor) for x in a):
            return type(a)(self.to_host(x) for x in a)
        if isinstance(a, torch.device) and a.type == self.rt.name:
            return _CPU
        return a

    def from_host(self, r: Any) -> Any:
        if isinstance(r, torch.Tensor):
            return self._result(r)
        if isinstance(r, (list, tuple)):
            return type(r)(self.from_host(x) for x in r)
        return r

    def _result(self, r: torch.Tensor) -> torch.Tensor:
        if r.device.type != "cpu":
            return r
        if r._is_zerotensor():  # storage-less zeros: real zeros on the device
            out = storage.empty_strided(self.rt, r.shape, storage.contiguous_strides(r.shape),
                                        r.dtype)
            self.views.of(out).zero_()
            return out
        for dev, h in self.pairs:  # an argument itself (in-place, out=)
            if r is h:
                return _unresized("the op", dev, h)
        rt = self.rt
        ptr = r.untyped_storage().data_ptr()
        if rt.base <= ptr < rt.base + rt.hbm.capacity_bytes and r.untyped_storage().nbytes():
            view = self._alias(r)
            if view is not None:
                return view
        out = storage.empty_strided(rt, r.shape, _dense_strides(r), r.dtype)
        if r.numel():
            self.views.of(out).copy_(r)
        return out

    def _alias(self, r: torch.Tensor) -> torch.Tensor | None:
        """A device view of the argument storage a host result lies in."""
        p = r.data_ptr()
        for dev, _ in self.pairs:
            st = dev.untyped_storage()
            lo = st.data_ptr()
            if lo <= p < lo + max(st.nbytes(), 1):
                isz = r.element_size()
                base = dev if dev.dtype == r.dtype else dev.view(r.dtype) if \
                    dev.is_contiguous() else None
                if base is None or (p - lo) % isz:
                    return None
                return torch.as_strided(base, r.shape, r.stride(), (p - lo) // isz)
        return None


def _unresized(op: Any, dev: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """The device argument an in-place host call returned, which must keep its shape: a CPU
    kernel that resizes its in-place argument (against the in-place rule) would have
    written an alias of HBM past the tensor's block. Loud, never silent."""
    if h.shape != dev.shape:
        raise RuntimeError(f"{op} resized its in-place argument from {list(dev.shape)} to "
                           f"{list(h.shape)}; an in-place op cannot change its tensor's shape "
                           f"on the device (write into a tensor of the result's shape)")
    return dev


def _dense_strides(r: torch.Tensor) -> list[int]:
    """r's strides when it is dense (keeps channels-last and friends), else contiguous."""
    if r.is_contiguous():
        return storage.contiguous_strides(r.shape)
    order = sorted(range(r.dim()), key=lambda i: r.stride(i))
    dense, acc = [0] * r.dim(), 1
    for i in order:
        dense[i] = acc
        acc *= max(r.shape[i], 1)
    if all(r.shape[i] == 1 or dense[i] == r.stride(i) for i in range(r.dim())):
        return dense
    return storage.contiguous_strides(r.shape)


_Tensor = torch.Tensor


def run(rt: Runtime, views: storage.HostViews, op: Any, args: tuple, kwargs: dict) -> Any:
    """`op(*args, **kwargs)` with PyTorch's CPU kernel on host aliases.

    `out=` arguments get fresh CPU tensors (a CPU kernel resizes its outputs, which an alias
    of HBM must not do); the device outputs are then resized to the results and filled.
    The common call (tensors and scalars as positional arguments, no keyword tensors, one
    tensor result) takes a lean path: every op of reference mode passes here. A fresh result
    is copied from the CPU's output into HBM: a memcpy costs less than sizing the result
    first with the meta kernel (~100 us a pointwise op in torch 2.13) to write it in place."""
    if not kwargs or not any(isinstance(v, (_Tensor, list, tuple, torch.device))
                             for v in kwargs.values()):  # (a factory's device= is mapped)
        fast = _run_simple(rt, views, op, args, kwargs)
        if fast is not _NOT_SIMPLE:
            return fast
    return _run_general(rt, views, op, args, kwargs)


_NOT_SIMPLE = object()


def _run_simple(rt: Runtime, views: storage.HostViews, op: Any, args: tuple,
                kwargs: dict) -> Any:
    hargs = []
    aliases = []
    lo, hi = rt.base, rt.end
    for a in args:
        if isinstance(a, _Tensor):
            if a.is_cpu:
                if a.dim():
                    return _NOT_SIMPLE  # the general path raises the device error
            elif lo <= a.data_ptr() < hi or a.device.type == rt.name:
                h = views.of(a)
                aliases.append((a, h))
                hargs.append(h)
                continue
            else:
                return _NOT_SIMPLE
        elif isinstance(a, (list, tuple)) and any(isinstance(x, _Tensor) for x in a):
            return _NOT_SIMPLE
        hargs.append(a)
    out_op = host_direct.out_overload(op)
    key = None
    if out_op is not None:
        key = host_direct.signature(op, args, kwargs)
        out = host_direct.run(rt, views, out_op, key, hargs, kwargs)
        if out is not None:
            return out
    with torch._C._ExcludeDispatchKeyGuard(_EXCLUDED):
        r = op(*hargs, **kwargs)
    if not isinstance(r, _Tensor):
        if isinstance(r, (tuple, list)):
            call = HostCall(rt, views)
            call.pairs = aliases
            return call.from_host(r)
        return r
    for dev, h in aliases:  # in place: the argument itself
        if r is h:
            return _unresized(op, dev, h)
    ptr = r.data_ptr()
    if (ptr and lo <= ptr < hi) or r._is_zerotensor() or \
            not r.is_contiguous():
        call = HostCall(rt, views)
        call.pairs = aliases
        return call.from_host(r)
    out = storage.empty_contiguous(rt, r.shape, r.dtype, r.numel(), r.stride())
    if out_op is not None:
        host_direct.record(key, r)
    if ptr:
        views.of(out).copy_(r)
    return out


def _run_general(rt: Runtime, views: storage.HostViews, op: Any, args: tuple,
                 kwargs: dict) -> Any:
    check_devices(rt, str(op), args, kwargs)
    call = HostCall(rt, views)
    hargs = tuple(call.to_host(a) for a in args)
    outs = out_arguments(op)
    hkwargs = {}
    for k, v in kwargs.items():
        if k in outs and isinstance(v, torch.Tensor) and v.device.type == rt.name:
            hkwargs[k] = torch.empty(0, dtype=v.dtype)
        else:
            hkwargs[k] = call.to_host(v)
    with torch._C._ExcludeDispatchKeyGuard(_EXCLUDED):
        result = op(*hargs, **hkwargs)
    if not any(k in outs for k in kwargs):
        return call.from_host(result)
    for k in outs:
        dev, cpu = kwargs.get(k), hkwargs.get(k)
        if isinstance(dev, torch.Tensor) and dev.device.type == rt.name:
            if list(dev.shape) != list(cpu.shape):  # as ATen: same shape, strides kept
                storage.resize(rt, dev, cpu.shape, cpu.stride())
            if cpu.numel():
                views.of(dev).copy_(cpu)
    return _swap_outs(result, hkwargs, kwargs, outs, call)


def _swap_outs(result: Any, hkwargs: dict, kwargs: dict, outs: tuple, call: HostCall) -> Any:
    """The result with each CPU out tensor replaced by its device tensor."""
    by_id = {id(hkwargs[k]): kwargs[k] for k in outs if k in kwargs}
    if isinstance(result, torch.Tensor):
        return by_id.get(id(result), call.from_host(result))
    if isinstance(result, (tuple, list)):
        return type(result)(by_id.get(id(r), r) if isinstance(r, torch.Tensor) else r
                            for r in result)
    return result


_OUTS: dict[Any, tuple[str, ...]] = {}


def out_arguments(op: Any) -> tuple[str, ...]:
    """Names of an overload's keyword-only mutable arguments (out=, grad_input=, ...)."""
    got = _OUTS.get(op)
    if got is None:
        schema = getattr(op, "_schema", None)
        got = tuple(a.name for a in schema.arguments if a.kwarg_only and a.alias_info is not None
                    and a.alias_info.is_write) if schema is not None else ()
        _OUTS[op] = got
    return got


# The host call runs below autograd (the device op already is): keep it from re-recording.
_EXCLUDED = torch._C.DispatchKeySet(torch._C.DispatchKey.AutogradCPU) | torch._C.DispatchKeySet(
    torch._C.DispatchKey.AutocastCPU)
