"""Device tensors: real PrivateUse1 tensors whose storage is a block of the simulated HBM.

* `empty_strided` allocates a block from the Runtime's HBM, wraps its host address in a
  non-owning torch storage and attaches it to an empty PrivateUse1 tensor (the `set_`
  redispatched to the CPU kernel, which only writes metadata). The block is freed from a
  weak reference to the storage (Runtime.watch): when the last view of it dies.
* `host` is a CPU tensor over the same bytes (no copy): what reference mode and the host
  fallback compute on, and what `.cpu()` copies from.
* `hbm_view` is the NKI view of a device tensor (trnsim.nki NkiTensor in HBM, with the
  tensor's shape, strides and offset) that kernels read and write: int64 tensors as int32
  pairs, 0-d tensors as shape (1,) (docs/device-kernels.md).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from trnsim.backend.runtime import Runtime

from trnsim import dtypes as dt
from trnsim.memory import Buffer, Layout

_CPU_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)
_SET_STORAGE = torch.ops.aten.set_.source_Storage_storage_offset
_SET_STORAGE_BOXED = _SET_STORAGE._handle.redispatch_boxed  # without OpOverload's frame

# torch dtype -> trnsim dtype of the kernels' view (int64: int32 pairs; float64: none)
NKI_DTYPES: dict[torch.dtype, dt.DType] = {
    torch.float32: dt.float32, torch.bfloat16: dt.bfloat16, torch.float16: dt.float16,
    torch.int32: dt.int32, torch.int16: dt.int16, torch.int8: dt.int8, torch.uint8: dt.uint8,
    torch.uint16: dt.uint16, torch.uint32: dt.uint32,
    torch.bool: dt.bool_, torch.int64: dt.int32,
    torch.float8_e4m3fn: dt.float8_e4m3fn, torch.float8_e5m2: dt.float8_e5m2,
}
KERNEL_DTYPES = frozenset(NKI_DTYPES)


def storage_nbytes(size: Any, stride: Any, itemsize: int) -> int:
    """Bytes a tensor of `size`/`stride` spans from its first element (0 when empty)."""
    if any(s == 0 for s in size):
        return 0
    return (1 + sum((s - 1) * st for s, st in zip(size, stride, strict=True))) * itemsize


def contiguous_strides(size: Any) -> list[int]:
    strides, acc = [], 1
    for s in reversed(size):
        strides.append(acc)
        acc *= max(int(s), 1)
    return strides[::-1]


def new_storage(rt: Runtime, nbytes: int) -> torch.UntypedStorage:
    """A fresh HBM block as a torch storage of the device, freed when the storage dies."""
    handle, off = rt.allocate(nbytes)
    st = torch._C._construct_storage_from_data_pointer(rt.base + off, rt.device, nbytes)
    rt.watch(handle, st)
    return st


def attach(t: torch.Tensor, st: torch.UntypedStorage, offset: int, size: Any,
           stride: Any) -> torch.Tensor:
    """Point `t` at `st` with this geometry (metadata only)."""
    _SET_STORAGE_BOXED(_CPU_KEYS, t, st, offset, list(size), list(stride))
    return t


def empty_strided(rt: Runtime, size: Any, stride: Any, dtype: torch.dtype | None) -> torch.Tensor:
    dtype = dtype or torch.get_default_dtype()
    size = [int(s) for s in size]
    if any(s < 0 for s in size):
        raise RuntimeError(f"Trying to create tensor with negative dimension: {size}")
    stride = [int(s) for s in stride]
    itemsize = _itemsize(dtype)
    st = new_storage(rt, storage_nbytes(size, stride, itemsize))
    return attach(torch._C._acc.create_empty_tensor([0], dtype), st, 0, size, stride)


def empty_contiguous(rt: Runtime, size: Any, dtype: torch.dtype, numel: int,
                     stride: Any = None) -> torch.Tensor:
    """empty_strided's lean form for a contiguous result of known element count (`stride`:
    its strides when known, e.g. those of the CPU result it copies)."""
    nbytes = numel * dtype.itemsize
    handle, off = rt.allocate(nbytes)
    st = torch._C._construct_storage_from_data_pointer(rt.base + off, rt.device, nbytes)
    rt.watch(handle, st)
    t = torch._C._acc.create_empty_tensor(_EMPTY, dtype)
    _SET_STORAGE_BOXED(_CPU_KEYS, t, st, 0, size,
                       contiguous_strides(size) if stride is None else stride)
    return t


_EMPTY = [0]


def empty(rt: Runtime, size: Any, dtype: torch.dtype | None = None) -> torch.Tensor:
    return empty_strided(rt, size, contiguous_strides(size), dtype)


def resize(rt: Runtime, t: torch.Tensor, size: Any, stride: Any | None = None) -> torch.Tensor:
    """aten resize_: keep the storage when it is large enough, else move to a larger block
    (the old bytes are copied over, as resize_ keeps the existing elements)."""
    size = [int(s) for s in size]
    stride = contiguous_strides(size) if stride is None else [int(s) for s in stride]
    itemsize = _itemsize(t.dtype)
    need = storage_nbytes(size, stride, itemsize) + t.storage_offset() * itemsize
    old = t.untyped_storage()
    if need > old.nbytes():
        st = new_storage(rt, need)
        keep = min(old.nbytes(), need)
        if keep:
            dst = rt.hbm.data[st.data_ptr() - rt.base:][:keep]
            dst[...] = rt.hbm.data[old.data_ptr() - rt.base:][:keep]
        return attach(t, st, t.storage_offset(), size, stride)
    return attach(t, old, t.storage_offset(), size, stride)


def _itemsize(dtype: torch.dtype) -> int:
    return dtype.itemsize


def byte_offset(rt: Runtime, t: torch.Tensor) -> int:
    """HBM byte offset of the tensor's storage."""
    return t.untyped_storage().data_ptr() - rt.base


class HostViews:
    """One CPU tensor over all of HBM per dtype: `host(t)` is an as_strided of it."""

    def __init__(self, rt: Runtime):
        self._bytes = torch.frombuffer(rt.hbm._map, dtype=torch.uint8)
        self._views: dict[torch.dtype, torch.Tensor] = {}
        self._base = rt.base

    def of_bytes(self, offset: int, nbytes: int) -> torch.Tensor:
        """The uint8 CPU tensor over HBM bytes [offset, offset + nbytes)."""
        return self._bytes[offset:offset + nbytes]

    def of(self, t: torch.Tensor) -> torch.Tensor:
        """A CPU tensor aliasing the device tensor's bytes (same shape, strides, dtype, and
        the lazy conjugate and negative bits: `z.conj()` and its `.imag`)."""
        h = self._alias(t)
        if t.is_conj():
            h = h.conj()
        if t.is_neg():
            h = h._neg_view()
        return h

    def _alias(self, t: torch.Tensor) -> torch.Tensor:
        ptr = t.data_ptr()
        if ptr:
            dtype = t.dtype
            start, rem = divmod(ptr - self._base, dtype.itemsize)
            if not rem:
                base = self._views.get(dtype)
                if base is None:
                    base = self._views[dtype] = self._bytes.view(dtype)
                return _AS_STRIDED(base, t.shape, t.stride(), start)
            # a storage reinterpreted at an odd byte offset: alias through its bytes
            st = t.untyped_storage()
            raw = self._bytes[st.data_ptr() - self._base:][:st.nbytes()]
            return _AS_STRIDED(raw.view(dtype), t.shape, t.stride(), t.storage_offset())
        # no elements (data_ptr() is 0): nothing to alias
        return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype)


_AS_STRIDED = torch.as_strided


def hbm_view(rt: Runtime, t: torch.Tensor, name: str, as_dtype: dt.DType | None = None) -> Any:
    """The NkiTensor (HBM) a kernel sees for device tensor `t` (docs/device-kernels.md);
    `as_dtype` reinterprets its bytes as a dtype of the same size (e.g. uint8 bits as
    float8_e4m3, which torch lacks)."""
    from trnsim.nki.tensor import NkiTensor

    dtype = NKI_DTYPES.get(t.dtype)
    if as_dtype is not None:
        if as_dtype.itemsize != t.element_size():
            raise TypeError(f"cannot view {t.dtype} bytes as {as_dtype.name}")
        dtype = as_dtype
    if dtype is None:
        known = ", ".join(str(d).removeprefix("torch.") for d in NKI_DTYPES)
        raise TypeError(f"{name}: a {t.dtype} tensor of shape {list(t.shape)} has no NKI dtype "
                        f"(kernels take {known})")
    st = t.untyped_storage()
    nbytes = st.nbytes()
    off = st.data_ptr() - rt.base
    shape, strides, offset = tuple(t.shape), tuple(t.stride()), t.storage_offset()
    if not shape:
        shape, strides = (1,), (1,)
    if t.dtype == torch.int64 and as_dtype is None:
        shape, strides, offset = (*shape, 2), (*tuple(2 * s for s in strides), 1), 2 * offset
    buf = Buffer(rt.hbm, "hbm", None, 0, 1, off, max(nbytes, 1), "shared_hbm", name,
                 shape=shape, dtype=dtype)
    return NkiTensor(buf, Layout(dtype, offset, shape, strides))


def numel(size: Any) -> int:
    return math.prod(int(s) for s in size)
