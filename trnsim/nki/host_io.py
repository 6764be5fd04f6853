"""Kernel arguments from the host (numpy arrays, torch CPU tensors) into HBM, and back.

Any layout is accepted: a transposed, Fortran-order, sliced, negative-stride, offset, 0-d or
size-0 array reaches the kernel as a dense row-major HBM tensor of its shape and values (a
device copy is dense), and what the kernel writes goes back through the array's own strides.
An array whose writes cannot go back (read-only, elements sharing memory, overlapping another
argument, a torch inference tensor) is still readable; a kernel instruction writing it raises
at the kernel's line (core.NeuronCore.issue). Knows nothing about instructions or time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trnsim import dtypes as dt
from trnsim.errors import ConstraintError, KernelError

# numpy >= 1.25 moved it to np.exceptions
_TOO_HARD = getattr(np, "exceptions", np).TooHardError

# ---------------------------------------------------------------- host array views


def is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "detach")


def is_array_arg(x: Any) -> bool:
    return isinstance(x, np.ndarray) or is_torch(x)


def to_host_array(x: Any, name: str = "") -> np.ndarray:
    """numpy view (no copy where it can be) of a numpy array or torch CPU tensor, bf16 and
    fp8 through their bits; raises ConstraintError for what has no dense device copy."""
    if is_torch(x):
        return _torch_view(x, name)
    if isinstance(x, np.ma.MaskedArray):
        raise ConstraintError(f"{_what(name)} is a numpy masked array: a device tensor has no "
                              "mask; pass a.filled(value) or np.asarray(a)")
    return np.asarray(x)


def _what(name: str) -> str:
    return f"kernel argument '{name}'" if name else "kernel argument"


def _torch_view(x: Any, name: str) -> np.ndarray:
    import torch

    t = x.detach()
    if t.device.type != "cpu":
        raise ConstraintError(f"{_what(name)} is a torch tensor on device '{t.device}'; "
                              "nki.simulate takes CPU tensors (call .cpu())")
    if t.layout != torch.strided:
        raise ConstraintError(f"{_what(name)} is a torch tensor with layout {t.layout}; only "
                              "dense (torch.strided) tensors have a device copy (call "
                              ".to_dense())")
    t = t.resolve_conj().resolve_neg()
    tname = str(t.dtype).replace("torch.", "")
    if tname == "bfloat16":
        import ml_dtypes

        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    if tname.startswith("float8"):
        return t.view(torch.uint8).numpy().view(dt.resolve(tname).storage)
    return t.numpy()


def from_host_array(a: np.ndarray, like: Any) -> Any:
    """A kernel result as the kind of host object `like` is (torch if it is a tensor)."""
    if like is None or not is_torch(like):
        return a
    import torch

    name = dt.resolve(a.dtype).name
    if name == "bfloat16":
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    if name.startswith("float8"):
        return torch.from_numpy(a.view(np.uint8).copy()).view(getattr(torch, name))
    return torch.from_numpy(np.array(a))


def native(arr: np.ndarray) -> np.ndarray:
    """The array in native byte order (a copy only when it was not)."""
    if arr.dtype.byteorder in ("=", "|") or arr.dtype.isnative:
        return arr
    return arr.astype(arr.dtype.newbyteorder("="))


def device_dtype(arr: np.ndarray, name: str) -> dt.DType:
    """The device dtype of a host array, or ConstraintError listing the known ones."""
    if arr.dtype == np.float64:
        raise ConstraintError(f"{_what(name)}: float64 is not a device dtype (use float32)")
    try:
        return dt.resolve(arr.dtype)
    except (TypeError, KeyError, ValueError) as e:
        raise ConstraintError(f"{_what(name)}: dtype {arr.dtype} has no device equivalent "
                              f"(known: {', '.join(dt.ALL)})") from e


# ---------------------------------------------------------------- write-back


def overlapping(arr: np.ndarray) -> bool:
    """True if two elements of `arr` may be one memory location (a broadcast or zero-stride
    view). Sufficient test: with the axes sorted by stride, each must step past all the bytes
    the smaller ones reach; layouts it cannot prove disjoint count as overlapping."""
    reach = arr.dtype.itemsize
    axes = sorted((abs(s), n) for n, s in zip(arr.shape, arr.strides, strict=True) if n > 1)
    for stride, count in axes:
        if stride < reach:
            return True
        reach += (count - 1) * stride
    return False


def write_refusal(host: Any, arr: np.ndarray) -> str:
    """Why values written into this argument could not go back to the host ("" if they can)."""
    if is_torch(host):
        if host.is_inference() and not _inference_mode():
            return "is a torch inference tensor (made under torch.inference_mode)"
    elif not arr.flags.writeable:
        return "is a read-only array (numpy flags.writeable is False)"
    if arr.size > 1 and overlapping(arr):
        return "has elements that share memory (a broadcast or zero-stride view)"
    return ""


def _inference_mode() -> bool:
    import torch

    return torch.is_inference_mode_enabled()


def _bits(a: np.ndarray) -> np.ndarray:
    """The elements' bit patterns, any strides (a same-size view needs no contiguity)."""
    isz = a.dtype.itemsize
    if isz in (1, 2, 4, 8):
        return a.view(np.dtype(f"u{isz}"))
    return np.ascontiguousarray(a).view(np.uint8)


_COMPARE_BYTES = 1 << 23  # compare in slices: no full-size temporary for a GiB argument, and
# a slice's temporary stays in cache


def _same_bytes(tensor: Any, cur: np.ndarray) -> bool:
    """True if the HBM copy still holds the host array's bytes, compared in place (no copy of
    either) where both are dense and of one element size; False where they differ or where
    that cannot be told this way (write_back then reads the copy and compares values)."""
    buf = tensor.buffer
    if (not cur.flags.c_contiguous or tensor.offset != 0 or buf.nbytes != cur.nbytes
            or tensor.dtype.itemsize != cur.dtype.itemsize or tensor.dtype.kind == "packed"
            or tensor.strides != tuple(int(s) // cur.dtype.itemsize for s in cur.strides)):
        return False
    dev, host = buf.raw(), cur.reshape(-1).view(np.uint8)
    wide = 8 if cur.nbytes % 8 == 0 and dev.ctypes.data % 8 == host.ctypes.data % 8 == 0 else 1
    if wide > 1:  # the same bytes as 8-byte words: an eighth of the comparisons
        dev, host = dev.view(np.uint64), host.view(np.uint64)
    step = _COMPARE_BYTES // wide
    return all(np.array_equal(dev[i:i + step], host[i:i + step])
               for i in range(0, dev.size, step))


@dataclass(eq=False)
class HostArgument:
    """One host array passed to a kernel, and the HBM tensor that holds its copy."""

    host: Any  # the user's numpy array or torch tensor
    array: np.ndarray  # a view of its elements (host byte order)
    tensor: Any  # the HBM NkiTensor (or View) the kernel got
    name: str
    refusal: str = ""  # why writes cannot go back ("" if they can)
    # Arguments whose host elements overlap this one's (one array passed twice, or two views
    # of one base): each has its own HBM copy, so at most one of them may be written.
    overlaps: list[HostArgument] = field(default_factory=list)
    written: bool = False  # an instruction wrote its HBM copy (tracked for guarded ones)

    def on_write(self, _buffer: Any) -> str:
        """Buffer.write_guard: why this write is refused ("" to allow it, and remember it)."""
        if self.refusal:
            return (f"kernel argument '{self.name}' {self.refusal}, so what the kernel writes "
                    "here could not be given back; pass a writable array of its own, or write "
                    "a new nl.shared_hbm tensor and return it")
        for other in self.overlaps:
            if other.written:
                return (f"kernel argument '{self.name}' shares host memory with kernel argument "
                        f"'{other.name}', which the kernel already wrote: each has its own HBM "
                        "copy, and both cannot be given back; pass separate arrays")
        self.written = True
        return ""


def shares_memory(a: np.ndarray, b: np.ndarray) -> bool:
    try:
        return bool(np.shares_memory(a, b, max_work=1 << 16))
    except _TOO_HARD:
        return True  # undecided: assume they do


def guard_writes(args: Sequence[HostArgument]) -> bool:
    """Give the HBM copy of each argument whose writes need watching a Buffer.write_guard;
    True if there is any (the Device then checks written operands)."""
    for i, a in enumerate(args):
        for b in args[:i]:
            if shares_memory(a.array, b.array):
                a.overlaps.append(b)
                b.overlaps.append(a)
    guarded = [a for a in args if a.refusal or a.overlaps]
    for a in guarded:
        a.tensor.buffer.write_guard = a.on_write
    return bool(guarded)


def write_back(args: Sequence[HostArgument]) -> None:
    """Copy each argument's HBM values into its host array if the kernel changed them (an
    overlapping argument: if the kernel wrote it, the only one it may have written)."""
    for a in args:
        if a.array.size == 0 or (a.overlaps and not a.written):
            continue
        cur = native(a.array)
        if not a.overlaps and _same_bytes(a.tensor, cur):
            continue
        new = a.tensor.read()
        new = new.view(cur.dtype) if new.dtype.itemsize == cur.dtype.itemsize \
            else new.astype(cur.dtype)
        if not a.overlaps and np.array_equal(_bits(cur), _bits(new)):
            continue
        if a.refusal:  # every write was refused at its instruction: unreachable unless a bug
            raise KernelError(f"{_what(a.name)} {a.refusal}: the kernel wrote it, and the "
                              "values cannot be given back")
        if is_torch(a.host):
            import torch

            with torch.no_grad():
                a.host.copy_(from_host_array(new, a.host))
        else:
            a.array[...] = new
