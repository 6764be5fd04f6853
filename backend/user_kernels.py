"""User NKI kernels on device tensors: `kernel(x_dev, ...)`, `nki_op`, `wrap_nki`.

An `@nki.jit` kernel (either API generation) called with device tensors runs on the device's
own HBM: its tensor arguments are the tensors' bytes (no copy), what it writes lands in them,
and the HBM tensors it returns come back as device tensors (a returned block becomes the new
tensor's storage). The launch is timed on the device clock like any op. Called with fake
tensors (torch.compile tracing, `register_fake`), the kernel is traced without values on a
scratch chip to learn its outputs' shapes and dtypes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from trnsim.backend import launch as launching
from trnsim.backend import storage
from trnsim.backend.host import DeviceMismatch
from trnsim.backend.runtime import Runtime

from trnsim import dtypes as dt

_TORCH_DTYPES = {v.name: k for k, v in storage.NKI_DTYPES.items() if k != torch.int64}
# NKI dtypes torch lacks (the IEEE-style float8_e4m3, the packed MX float8_e5m2_x4 and
# float4_e2m1fn_x4, ...) come back as their bits: the unsigned integer of their size.
_BITS = {1: torch.uint8, 2: torch.uint16, 4: torch.uint32}


def torch_dtype(d: dt.DType) -> torch.dtype:
    got = _TORCH_DTYPES.get(d.name) or _BITS.get(d.itemsize)
    if got is None:
        raise TypeError(f"a kernel returned a {d.name} tensor, which has no torch dtype")
    return got


def _is_fake(x: Any) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(x, FakeTensor) or (isinstance(x, torch.Tensor) and x.device.type == "meta")


class TorchAdapter:
    """trnsim.nki.runner's hook for device tensors (register_device_adapter)."""

    def __init__(self, rt: Runtime):
        self.rt = rt

    def owns(self, x: Any) -> bool:
        return isinstance(x, torch.Tensor) and x.device.type == self.rt.name

    def launch(self, kernel: Any, args: Any, kwargs: dict, options: dict) -> Any:
        from trnsim.nki.jit import launching_config
        from trnsim.nki.runner import run_kernel

        rt = self.rt
        name = getattr(kernel, "__name__", str(kernel))
        # Device tensors live on the device's chip (TRNSIM_CHIP): the kernel runs there,
        # whatever chip its decorator or the Beta-1 default names.
        options.pop("chip", None)
        flat = [*args, *kwargs.values()]
        if any(_is_fake(x) for x in _tensors(flat)):
            return self._fake_launch(kernel, args, kwargs, options)
        for x in _tensors(flat):
            if not self.owns(x) and (x.dim() > 0):
                raise DeviceMismatch(
                    f"kernel {name}: all tensor arguments must be on {rt.device}; got a "
                    f"{x.device} tensor of shape {list(x.shape)}")
        for x in flat:
            if isinstance(x, np.ndarray):
                raise DeviceMismatch(f"kernel {name}: a numpy array mixed with {rt.name} "
                                     f"tensors; move it with torch.from_numpy(a).to('{rt.name}')")
        nargs = [launching.to_nki(rt, a, f"arg{i}") for i, a in enumerate(args)]
        nkwargs = {k: launching.to_nki(rt, v, k) for k, v in kwargs.items()}
        options.pop("values", None)
        run = run_kernel(kernel, nargs, nkwargs, chip=rt.chip, hbm=rt.hbm, host_outputs=False,
                         onchip_pool=rt.onchip_pool, **options)
        run.outputs = self._to_torch(run.outputs, flat)
        config = launching_config()  # the nki.jit kernel's compile_config: how it is timed
        if config is not None:
            run.extra["compile_config"] = config
        launching.record(rt, run, name, name, launching.describe(args, kwargs))
        return run

    # ------------------------------------------------------------ results
    def _to_torch(self, r: Any, inputs: list) -> Any:
        from trnsim.nki.tensor import NkiTensor

        if isinstance(r, NkiTensor):
            return self._tensor(r, inputs)
        if isinstance(r, (tuple, list)):
            return type(r)(self._to_torch(x, inputs) for x in r)
        if isinstance(r, dict):
            return {k: self._to_torch(v, inputs) for k, v in r.items()}
        return r

    def _tensor(self, t: Any, inputs: list) -> torch.Tensor:
        rt = self.rt
        buf, lay = t.buffer, t.layout
        if buf.space != "hbm":
            raise RuntimeError(f"kernel returned {buf.label} in {buf.space}; kernel outputs "
                               "must be HBM tensors (nl.shared_hbm)")
        dtype = torch_dtype(lay.dtype)
        shape, strides, offset = list(lay.shape), list(lay.strides), lay.offset
        for x in _tensors(inputs):  # a view of an argument: a view of its storage
            st = x.untyped_storage()
            if st.data_ptr() - rt.base == buf.byte_start:
                base = torch.as_strided(x, [st.nbytes() // x.element_size()], [1], 0) \
                    if x.dtype == dtype else None
                if base is not None:
                    return torch.as_strided(base, shape, strides, offset)
        handle = buf._handle
        buf._handle = None  # the storage owns the block from now on
        st = torch._C._construct_storage_from_data_pointer(rt.base + buf.byte_start, rt.device,
                                                           buf.nbytes)
        if handle is not None:
            rt.adopt(handle, st)
        out = torch._C._acc.create_empty_tensor([0], dtype)
        return storage.attach(out, st, offset, shape, strides)

    # ------------------------------------------------------------ fake tensors
    def _fake_launch(self, kernel: Any, args: Any, kwargs: dict, options: dict) -> Any:
        """Trace the kernel without values on a scratch chip; outputs as empty tensors of
        this device (fake ones under a FakeTensorMode)."""
        from trnsim.nki.runner import run_kernel

        def shaped(x: Any) -> Any:
            if isinstance(x, torch.Tensor):
                d = storage.NKI_DTYPES.get(x.dtype)
                if d is None:
                    raise TypeError(f"{x.dtype} has no device dtype")
                shape = (*x.shape, 2) if x.dtype == torch.int64 else tuple(x.shape)
                return np.broadcast_to(np.zeros((), d.storage), shape or (1,))
            if isinstance(x, (list, tuple)):
                return type(x)(shaped(v) for v in x)
            return x

        options.pop("values", None)
        run = run_kernel(kernel, [shaped(a) for a in args],
                         {k: shaped(v) for k, v in kwargs.items()}, chip=self.rt.chip,
                         values=False, host_outputs=False, **options)
        run.outputs = _empty_like_result(run.outputs, self.rt)
        return run


def _empty_like_result(r: Any, rt: Runtime) -> Any:
    from trnsim.nki.tensor import NkiTensor

    if isinstance(r, NkiTensor):
        return torch.empty(list(r.shape), dtype=torch_dtype(r.dtype), device=rt.device)
    if isinstance(r, (tuple, list)):
        return type(r)(_empty_like_result(x, rt) for x in r)
    return r


def _tensors(items: Any):
    for a in items:
        if isinstance(a, torch.Tensor):
            yield a
        elif isinstance(a, (list, tuple)):
            yield from _tensors(a)


def install(rt: Runtime) -> None:
    from trnsim.nki.runner import register_device_adapter

    register_device_adapter(TorchAdapter(rt))


# ---------------------------------------------------------------- TorchNeuron's entry points


def nki_op(name: str, fn: Any = None, *, mutates_args: Any = (), schema: str | None = None,
           device_types: Any = None) -> Any:
    """Register a function that calls NKI kernels as a torch custom op (TorchNeuron's
    `nki_op`): `@nki_op("mylib::add", mutates_args={})` over a typed function. The same
    function serves as the fake implementation (its kernel calls trace shapes only), so the
    op works under torch.compile; add a backward with `op.register_autograd(...)`."""

    def wrap(f: Any) -> Any:
        op = torch.library.custom_op(name, f, mutates_args=_names(mutates_args),
                                     device_types=device_types, schema=schema)
        op.register_fake(f)
        return op

    return wrap(fn) if fn is not None else wrap


def _names(mutates_args: Any) -> Any:
    if mutates_args == "unknown":
        return mutates_args
    return tuple(mutates_args.keys() if isinstance(mutates_args, dict) else mutates_args)


class wrap_nki:
    """`wrap_nki(kernel)` / `wrap_nki(kernel)[grid]`: a launcher of an NKI kernel on device
    tensors; `[2]` launches a current-API kernel on two cores (LNC=2), `[d0, d1]` a Beta-1
    kernel's SPMD grid."""

    def __init__(self, kernel: Any):
        from trnsim.nki.jit import Kernel, jit

        self.kernel = kernel if isinstance(kernel, Kernel) or hasattr(kernel, "__getitem__") \
            else jit(kernel)
        self.__wrapped__ = getattr(self.kernel, "fn", kernel)
        self.__name__ = getattr(self.__wrapped__, "__name__", "kernel")

    def __getitem__(self, grid: Any) -> wrap_nki:
        return wrap_nki(self.kernel[grid])

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.kernel(*args, **kwargs)
