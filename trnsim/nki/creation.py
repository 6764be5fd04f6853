"""nki.language buffers and tensor creation: MemoryRegion, ndarray, zeros/ones/full, *_like,
shared constants, rand. Re-exported by trnsim.nki.language.

Creation functions that initialise memory lower to instructions (memset; memset + DMA for
HBM; a DMA for constants brought on chip), so the program record shows the work.
"""

from __future__ import annotations

import builtins
import enum
import os
from typing import Any

import numpy as np

from trnsim import dtypes as _dt
from trnsim.errors import ConstraintError
from trnsim.memory import Buffer as _Buffer
from trnsim.nki._isa_base import language_function
from trnsim.nki.context import current
from trnsim.nki.tensor import NkiTensor, as_dtype
from trnsim.nki.tile_reuse import allocate_reusing
from trnsim.nki.views import index_value
from trnsim.program import capture_location

float32, uint8, uint32 = _dt.float32, _dt.uint8, _dt.uint32

# ---------------------------------------------------------------- buffers
_KIND_REGION = {
    "sbuf": "sbuf",
    "psum": "psum",
    "shared_hbm": "shared_hbm",
    "private_hbm": "private_hbm",
    "hbm": "private_hbm",
}


class MemoryRegion(enum.Enum):
    """Where a tensor lives (nl.sbuf, nl.psum, nl.private_hbm, nl.shared_hbm; nl.hbm alias).

    Compares equal to a tensor's `buffer` when that buffer is of this kind.
    """

    sbuf = "sbuf"
    psum = "psum"
    private_hbm = "private_hbm"
    shared_hbm = "shared_hbm"

    def __repr__(self) -> str:
        return f"nl.{self.value}"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, MemoryRegion):
            return self is other
        if isinstance(other, _Buffer):
            return _KIND_REGION.get(other.kind) == self._value_
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._value_)  # (._value_: .value is a Python-level property)


sbuf = MemoryRegion.sbuf
psum = MemoryRegion.psum
private_hbm = MemoryRegion.private_hbm
shared_hbm = MemoryRegion.shared_hbm
hbm = MemoryRegion.private_hbm


def _region(buffer: Any) -> MemoryRegion:
    if isinstance(buffer, MemoryRegion):
        return buffer
    if isinstance(buffer, _Buffer):  # a tensor's .buffer
        return MemoryRegion(_KIND_REGION[buffer.kind])
    kind = getattr(buffer, "memory_region", None)  # B1 allocator objects map onto regions
    if isinstance(kind, MemoryRegion):
        return kind
    hint = " (strings are not buffers)" if isinstance(buffer, str) else ""
    raise ConstraintError(
        f"buffer={buffer!r} is not a buffer{hint}; use nl.sbuf, nl.psum, "
        "nl.hbm, nl.private_hbm or nl.shared_hbm",
        capture_location(),
    )


def is_hbm(buffer: Any) -> bool:
    """True for nl.hbm / nl.private_hbm / nl.shared_hbm (or an HBM tensor's buffer)."""
    return _region(buffer) in (private_hbm, shared_hbm)


def is_sbuf(buffer: Any) -> bool:
    return _region(buffer) is sbuf


def is_psum(buffer: Any) -> bool:
    return _region(buffer) is psum


def is_on_chip(buffer: Any) -> bool:
    return _region(buffer) in (sbuf, psum)


# ---------------------------------------------------------------- tensor creation


@language_function
def ndarray(
    shape: Any,
    dtype: Any,
    buffer: Any = sbuf,
    name: str = "",
    address: tuple[int, int] | None = None,
) -> NkiTensor:
    """A new tensor; contents undefined (the simulator fills NaN / 4 to expose such reads).

    address=(partition_offset, free_offset) places an on-chip tensor by hand: the free offset
    is a byte offset in each partition (the NKI 0.2.0 migration guide computes "virtual byte
    addresses" as `sca + i * n_k * 2` for bf16 tiles, and nki-library's SbufManager and
    attention kernels pass byte offsets, `bank * 2048` in PSUM), a multiple of the element
    size; PSUM tensors must start on a 2 KiB bank; the partition offset obeys the
    start-partition (quadrant) rule.
    """
    ctx = current("nl.ndarray")
    region = _region(buffer)
    dtype = as_dtype(dtype)
    shape = _shape_tuple(shape)
    if min(shape, default=1) < 1:
        raise ConstraintError(f"nl.ndarray: shape {list(shape)} has a dimension < 1")
    if region is sbuf or region is psum:
        loc = capture_location()
        space = region._value_  # (.value is a Python-level property)
        if address is not None:
            address = _check_address(ctx, region, shape, dtype, address)
            view = ctx.core.allocate(space, shape, dtype, name, address, loc=loc)
        else:
            view = allocate_reusing(
                ctx, loc, lambda: ctx.core.allocate(space, shape, dtype, name, loc=loc), space)
    else:
        if address is not None:
            raise ConstraintError(
                f"nl.ndarray: address= places on-chip tensors only; "
                f"{region!r} tensors are placed by the runtime"
            )
        view = _allocate_hbm(ctx, region, shape, dtype, name)
    return NkiTensor(view.buffer, view.layout)


def _check_address(
    ctx: Any, region: MemoryRegion, shape: tuple[int, ...], dtype: _dt.DType, address: Any
) -> tuple[int, int]:
    try:
        p0, f0 = address
    except (TypeError, ValueError) as e:
        raise ConstraintError(
            f"nl.ndarray: address={address!r} must be (partition_offset, free_offset)"
        ) from e
    p0 = index_value(p0, "nl.ndarray: address partition offset", "offsets must be integers")
    f0 = index_value(f0, "nl.ndarray: address free offset", "offsets must be integers")
    n = shape[0]
    allowed = (0,) if n > 64 else (0, 64) if n > 32 else (0, 32, 64, 96)
    if p0 not in allowed:
        raise ConstraintError(
            f"nl.ndarray: address partition offset {p0} for a tensor of {n} partitions; "
            f"it must be {' or '.join(map(str, allowed))} (start-partition quadrant rule)"
        )
    if region is psum:
        bank = ctx.chip.tile_size.get("psum_bank_fmax_bytes", 2048)
        if f0 % bank:
            raise ConstraintError(
                f"nl.ndarray: PSUM address free offset {f0} bytes is not on a PSUM bank "
                f"boundary; PSUM tensors start at a multiple of {bank} bytes"
            )
    if f0 < 0:
        raise ConstraintError(f"nl.ndarray: address free offset {f0} is negative")
    if f0 % dtype.itemsize:
        raise ConstraintError(
            f"nl.ndarray: address free offset {f0} bytes is not a multiple of the "
            f"{dtype.itemsize}-byte {dtype} element; the free offset is in bytes"
        )
    return p0, f0 // dtype.itemsize  # NeuronCore.allocate takes the offset in elements


def _allocate_hbm(
    ctx: Any,
    region: MemoryRegion,
    shape: tuple[int, ...],
    dtype: _dt.DType,
    name: str,
    array: np.ndarray | None = None,
) -> Any:
    if region is shared_hbm:
        # Shared HBM is one tensor for every program of the launch: programs after the first
        # get the allocation the first one made at the same point of the kernel.
        key = ctx.extra["shared_seq"]
        ctx.extra["shared_seq"] += 1
        shared = ctx.extra["shared_allocs"]
        if key not in shared:
            if array is not None:
                shared[key] = ctx.device.hbm_from_array(array, dtype, name)
            else:
                shared[key] = ctx.device.allocate_hbm(shape, dtype, name, "shared_hbm")
        return shared[key]
    if array is not None:
        return ctx.device.hbm_from_array(array, dtype, name)
    return ctx.device.allocate_hbm(shape, dtype, name, "private_hbm", ctx.core.index)


def _shape_tuple(shape: Any, what: str = "nl.ndarray") -> tuple[int, ...]:
    """A shape as a tuple of ints; floats (64.0) are refused, not truncated."""
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    if type(shape) is tuple:
        for s in shape:
            if type(s) is not int:
                break
        else:
            return shape  # the common case, without building per-dimension messages
    try:
        dims = list(shape)
    except TypeError as e:
        raise ConstraintError(f"{what}: shape {shape!r} is not a tuple of integers") from e
    shown = tuple(dims)
    return tuple(
        index_value(s, f"{what}: shape {shown} dimension {d}", "dimensions must be integers")
        for d, s in enumerate(dims)
    )


def _fill(t: NkiTensor, value: Any, name: str) -> NkiTensor:
    """Initialise a fresh tensor: memset on chip; memset + DMA for HBM (engines do the work)."""
    from trnsim.nki import isa as nisa

    value = _fill_value(value, t.dtype)
    if t.buffer.on_chip:
        nisa.memset(dst=t, value=value)
        return t
    n = t.size
    flat = t.reshape((n,))
    q, r = divmod(n, 128)
    stage = ndarray((builtins.min(n, 128), builtins.max(q, 1)), t.dtype, sbuf, name=f"{name}_fill")
    nisa.memset(dst=stage, value=value)
    if q:
        nisa.dma_copy(dst=flat[0 : 128 * q].reshape((128, q)), src=stage[:, 0:q])
    if r:
        nisa.dma_copy(dst=flat[128 * q : n].reshape((r, 1)), src=stage[0:r, 0:1])
    return t


def _fill_value(value: Any, dtype: _dt.DType) -> Any:
    if isinstance(value, NkiTensor):
        raise ConstraintError("fill value must be a compile-time constant, got a tensor")
    if dtype.kind in ("int", "uint", "bool"):
        f = float(value)
        if not f.is_integer():
            raise ConstraintError(
                f"fill value {value!r} is not an integer; {dtype.name} tensors "
                "take integer fill values"
            )
        return int(f)
    if dtype.kind == "packed" and float(value) != 0:
        raise ConstraintError(
            f"fill value {value!r}: packed {dtype.name} tensors can only be filled with 0"
        )
    return float(value)


@language_function
def zeros(shape: Any, dtype: Any, buffer: Any = sbuf, name: str = "") -> NkiTensor:
    """A new tensor filled with 0 (a memset instruction on chip)."""
    return _fill(ndarray(shape, dtype, buffer, name), 0, name)


@language_function
def ones(shape: Any, dtype: Any, buffer: Any = sbuf, name: str = "") -> NkiTensor:
    """A new tensor filled with 1."""
    return _fill(ndarray(shape, dtype, buffer, name), 1, name)


@language_function
def full(shape: Any, fill_value: Any, dtype: Any, buffer: Any = sbuf, name: str = "") -> NkiTensor:
    """A new tensor filled with `fill_value`."""
    return _fill(ndarray(shape, dtype, buffer, name), fill_value, name)


@language_function
def zeros_like(x: Any, dtype: Any = None, buffer: Any = None, name: str = "") -> NkiTensor:
    """Zeros with x's shape (and dtype unless given); buffer defaults to SBUF. x is a tensor:
    the documented API (SDK 2.33 and later) takes no grid here, unlike nl.empty_like."""
    from trnsim.nki.grids import NkiGrid

    if isinstance(x, NkiGrid):
        raise ConstraintError(
            f"nl.zeros_like: x is a {type(x).__name__}; zeros_like takes a tensor. For a grid, "
            "allocate with nl.empty_like(grid) and fill it with nisa.memset on its .data"
        )
    return zeros(
        x.shape, dtype if dtype is not None else x.dtype, sbuf if buffer is None else buffer, name
    )


@language_function
def empty_like(
    x: Any,
    dtype: Any = None,
    buffer: Any = None,
    name: str = "",
    *,
    transpose_axes: Any = None,
    address: Any = None,
) -> Any:
    """Uninitialised storage with x's geometry; dtype and buffer default to x's.

    x is an NkiTensor (a tensor of its shape) or an NkiTileGrid/NkiBlockGrid (a grid of the
    same type, navigation shape, tile shape, block grouping and edge extents; the cells of a
    strided selection are packed). transpose_axes shapes an SBUF destination for a later
    nisa.dma_transpose with those axes; address places it as in nl.ndarray.
    """
    from trnsim.nki.grid_storage import like

    return like(x, dtype, buffer, name, transpose_axes, address)


_CONSTANT_DTYPES = (
    "float32",
    "float16",
    "bfloat16",
    "int32",
    "int16",
    "int8",
    "uint32",
    "uint16",
    "uint8",
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e8m0fnu",
    "float8_e4m3",
    "bool",
)


@language_function
def shared_constant(constant: Any, dtype: Any = None) -> NkiTensor:
    """A constant tensor in shared HBM (embedded in the NEFF): a numpy array or a .npy path."""
    ctx = current("nl.shared_constant")
    if isinstance(constant, (str, os.PathLike)):
        try:
            arr = np.load(constant)
        except (OSError, ValueError) as e:
            raise ConstraintError(f"nl.shared_constant: cannot load {constant!r}: {e}") from e
    else:
        arr = np.asarray(constant)
    if dtype is not None:
        dtype = as_dtype(dtype)
        arr = _dt.cast(arr, dtype) if arr.dtype != dtype.storage else arr
    else:
        try:
            dtype = _dt.resolve(arr.dtype)
        except (TypeError, KeyError, ValueError):
            dtype = None
    if dtype is None or dtype.name not in _CONSTANT_DTYPES:
        raise ConstraintError(
            f"nl.shared_constant: dtype {arr.dtype} is not supported "
            f"(supported: {', '.join(_CONSTANT_DTYPES)}); cast the array, "
            "e.g. .astype(np.float32)"
        )
    if arr.ndim == 0:
        arr = arr.reshape(1)
    view = _allocate_hbm(ctx, shared_hbm, arr.shape, dtype, "shared_constant", array=arr)
    return NkiTensor(view.buffer, view.layout)


@language_function
def shared_identity_matrix(n: int, dtype: Any = uint8, dst: Any = None) -> NkiTensor:
    """An n x n identity matrix in SBUF: a shared constant in HBM, DMA'd in once per dtype."""
    from trnsim.nki import isa as nisa

    ctx = current("nl.shared_identity_matrix")
    n = index_value(n, "nl.shared_identity_matrix: n", "n must be an integer")
    dtype = as_dtype(dtype)
    cache = ctx.extra.setdefault("identity_tiles", {})
    key = (n, dtype.name)
    if dst is None and key in cache:
        return cache[key]
    const = shared_constant(np.eye(n, dtype=np.float32), dtype=dtype)
    tile = dst if dst is not None else ndarray((n, n), dtype, sbuf, name=f"identity_{n}")
    nisa.dma_copy(dst=tile, src=const)
    if dst is None:
        cache[key] = tile
    return tile


@language_function
def rand(shape: Any, dtype: Any = float32, buffer: Any = sbuf, name: str = "") -> NkiTensor:
    """A new tile of uniform random values in [0, 1): nisa.rand2 on NC-v4, nisa.rng before."""
    from trnsim.nki import isa as nisa

    ctx = current("nl.rand")
    out = ndarray(shape, dtype, buffer, name)
    if ctx.chip.nc_version >= 4 and hasattr(nisa, "rand2"):
        nisa.rand2(dst=out, min=0.0, max=1.0)
        return out
    bits = ndarray(out.shape, uint32, sbuf, name=f"{name}_bits")
    nisa.rng(dst=bits)
    # 32 random bits scaled by 2^-32 land in [0, 1)
    nisa.tensor_scalar(dst=out, data=bits, op0=_ops_multiply(), operand0=2.0**-32)
    return out


def _ops_multiply() -> Any:
    from trnsim.nki.lang_ops import multiply

    return multiply


@language_function
def random_seed(seed: Any) -> None:
    """Seed the random number generator with a [1, 1] 32-bit integer tensor in SBUF/PSUM."""
    from trnsim.nki import isa as nisa

    if not isinstance(seed, NkiTensor):
        raise ConstraintError(
            f"nl.random_seed: seed must be a [1, 1] int32 tensor in SBUF or "
            f"PSUM, got {type(seed).__name__} {seed!r}"
        )
    if not seed.buffer.on_chip or seed.size != 1 or seed.dtype.kind not in ("int", "uint"):
        raise ConstraintError(
            f"nl.random_seed: seed must be a [1, 1] 32-bit integer tensor in "
            f"SBUF or PSUM, got {seed.dtype.name} {list(seed.shape)} in "
            f"{seed.buffer.space}"
        )
    nisa.set_rng_seed(src_seeds=seed)
