"""Beta-1 tensor creation: nl.ndarray, zeros, ones, full, zeros_like, empty_like, rand,
random_seed, shared_constant, shared_identity_matrix.

On chip, a shape may carry nl.par_dim: the tile is stored as (partitions, product of the other
dims) and the logical dims get strides over that storage, so block dimensions in front of the
partition axis are free-dim offsets. Fresh storage holds the simulator's NaN / 4 sentinel.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from trnsim import dtypes as dt
from trnsim.compat.neuronxcc.nki import _buffers, _overflow, _placement, _spill
from trnsim.compat.neuronxcc.nki._direct_blocks import DirectBlocks
from trnsim.compat.neuronxcc.nki._emit import issue
from trnsim.compat.neuronxcc.nki._errors import b1_error
from trnsim.compat.neuronxcc.nki._state import api, context, declaration, here
from trnsim.compat.neuronxcc.nki._tensor import tensor
from trnsim.errors import AllocationError, ConstraintError, KernelError
from trnsim.memory import Layout, View
from trnsim.nki.language import _allocate_hbm
from trnsim.program import SourceLocation, capture_location

_TARGET = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?::[^=]*)?=(?!=)")


def target_name(loc: SourceLocation | None, default: str = "") -> str:
    """The variable a call's result is assigned to (`x = nl.ndarray(...)` -> 'x'), for names."""
    if loc is not None and loc.code:
        m = _TARGET.match(loc.code)
        if m:
            return m.group(1)
    return default


def resolve_dtype(dtype: Any, what: str = "dtype") -> dt.DType:
    try:
        return dt.resolve(dtype)
    except (TypeError, KeyError, ValueError) as e:
        raise b1_error(
            ConstraintError,
            "err_unsupported_dtype_value",
            f"Unsupported {what} {dtype!r}, expected one of the following dtypes: "
            f"{', '.join(dt.ALL)}",
        ) from e


def parse_shape(shape: Any) -> tuple[tuple[int, ...], int]:
    """(logical shape, partition axis) of a shape that may contain one nl.par_dim."""
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        dims = list(shape)
    except TypeError as e:
        raise ConstraintError(f"shape {shape!r} is not a tuple of integers") from e
    marked = [k for k, d in enumerate(dims) if isinstance(d, _buffers.par_dim)]
    if len(marked) > 1:
        raise ConstraintError(f"shape {dims}: only one dimension can be nl.par_dim")
    try:
        logical = tuple(int(d) for d in dims)
    except (TypeError, ValueError) as e:
        raise ConstraintError(f"shape {dims} is not a tuple of integers") from e
    if any(n < 0 for n in logical):
        raise ConstraintError(f"shape {list(logical)} must be non-negative")
    return logical, (marked[0] if marked else 0)


def allocate(
    shape: Any, dtype: Any, buffer: Any = None, name: str = "", allocator: Any = None,
    decl: Any = None,
) -> tensor:
    """A fresh uninitialized tensor (space: sbuf, psum, shared_hbm, private_hbm). `decl`: the
    declaration it belongs to (_state.declaration; default: the current call's)."""
    ctx, st = context("nl.ndarray")
    dtype = resolve_dtype(dtype)
    space, direct = _buffers.resolve(buffer) if not isinstance(buffer, str) else (buffer, None)
    direct = direct or allocator
    logical, pdim = parse_shape(shape)
    if space in ("sbuf", "psum"):
        dev = ctx.device
        dev.declaring = decl if decl is not None else declaration(ctx)
        try:
            return _allocate_on_chip(ctx, st, space, logical, pdim, dtype, name, direct)
        finally:
            dev.declaring = None
    # nl.par_dim on an HBM tensor marks nothing (HBM has no partitions); AWS's memory-semantics
    # example declares its output as nl.ndarray((B, nl.par_dim(N), M), buffer=nl.shared_hbm).
    region = _buffers.shared_hbm if space == "shared_hbm" else _buffers.private_hbm
    if region is _buffers.shared_hbm and st.loops:
        raise b1_error(
            ConstraintError,
            "err_shared_hbm_must_in_kernel_level",
            "shared_hbm buffer can only be created top level kernel scope (this "
            "call is inside a loop)",
        )
    view = _allocate_hbm(ctx, region, logical, dtype, name)
    return tensor.whole(view.buffer, view.layout, None)


def _allocate_on_chip(
    ctx: Any,
    st: Any,
    space: str,
    logical: tuple[int, ...],
    pdim: int,
    dtype: dt.DType,
    name: str,
    direct: Any,
) -> tensor:
    if not logical:
        raise ConstraintError(
            f"{space} tensor '{name}': on-chip tensors need a partition dimension"
        )
    parts = logical[pdim]
    pmax = ctx.chip.tile_size["pmax"]
    if parts > pmax:
        raise b1_error(
            ConstraintError,
            "err_num_partition_exceed_arch_limit",
            f"number of partitions {parts} exceed architecture limitation of {pmax}.",
        )
    free = [n for d, n in enumerate(logical) if d != pdim]
    f_total = int(math.prod(free))
    if space == "psum":  # per tile: block dims (before the partition dim) are separate tiles
        tile = int(math.prod(logical[pdim + 1:])) * dtype.itemsize
        _check_psum_tile(ctx.chip, name, logical, dtype, tile)
    address = blocks = None
    if direct is not None:
        st.direct_alloc = True
        blocks = _traced_once(st, _direct_addresses(direct, logical, pdim, dtype))
        if len(blocks) == 1:
            address, blocks = blocks[0], None
    strides, acc = [0] * len(logical), 1
    for d in reversed(range(len(logical))):
        if d != pdim:
            strides[d] = acc
            acc *= logical[d]
    strides[pdim] = f_total
    base = Layout(dtype, 0, logical, tuple(strides))
    if blocks is not None:  # each block at its own direct address (_direct_blocks)
        slots = DirectBlocks(ctx, space, name, parts, f_total // len(blocks), logical[:pdim],
                             dtype, capture_location(), blocks)
        st.enter_scope(slots)
        return tensor.whole(slots, base, pdim)
    if direct is None and math.prod(logical[:pdim]) > 1:
        view = _whole_if_fits(ctx, st, space, (parts, f_total), dtype, name)
        if view is None:  # allocated block by block (see _spill)
            blocks = _spill.block_slots(ctx, space, logical, pdim, dtype, name, st.placement)
            st.enter_scope(blocks)
            return tensor.whole(blocks, base, pdim)
    else:
        view = _allocate_whole(ctx, space, (parts, f_total), dtype, name, address, direct)
    st.enter_scope(view.buffer)
    return tensor.whole(view.buffer, base, pdim)


def _whole_if_fits(
    ctx: Any, st: Any, space: str, shape: tuple[int, int], dtype: dt.DType, name: str
) -> View | None:
    """A block tensor in one allocation, if its launch's placement tries that and it fits."""
    placement = st.placement or _placement.Placement()
    if not placement.whole_first:
        return None
    try:
        view = ctx.core.allocate(space, shape, dtype, name)
    except AllocationError:
        return None
    placement.placed_whole = True
    return view


def _allocate_whole(
    ctx: Any,
    space: str,
    shape: tuple[int, int],
    dtype: dt.DType,
    name: str,
    address: Any,
    direct: Any,
) -> View:
    """One allocation of the whole tile: block slots give way first; an auto-allocated SBUF
    tile that still does not fit goes to the overflow space (see _overflow)."""
    while True:
        try:
            return ctx.core.allocate(space, shape, dtype, name, address)
        except AllocationError:
            if direct is None and _spill.evict_for(ctx, space):
                continue
            fits_alone = (
                shape[1] * dtype.itemsize <= ctx.chip.tile_size["total_available_sbuf_size"]
            )
            if space != "sbuf" or direct is not None or not fits_alone:
                raise
            return _overflow.allocate(ctx, shape[0], shape[1] * dtype.itemsize, dtype, name)


def _check_psum_tile(chip: Any, name: str, shape: tuple[int, ...], dtype: dt.DType,
                     nbytes: int) -> None:
    """A PSUM tile fits one 2 KiB bank per partition (psum_fmax: 512 fp32), NC-v4 tiles up to
    all banks (nki-api.md §3.4 TC2)."""
    banks = chip.psum.banks if chip.nc_version >= 4 else 1
    limit = banks * chip.psum.bank_bytes
    if nbytes > limit:
        what = f"psum tensor '{name}'" if name else "psum tensor"
        fits = (f"{banks} banks of {chip.psum.bank_bytes}" if banks > 1
                else f"one {chip.psum.bank_bytes}-byte bank")
        raise ConstraintError(
            f"{what} {list(shape)} {dtype.name}: {nbytes} bytes per partition; a PSUM tile "
            f"fits {fits} per partition on {chip.name} (psum_fmax: "
            f"{limit // 4} fp32; nki-api.md §3.4 TC2): tile the free axis")


def _traced_once(st: Any, blocks: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The addresses of a direct allocation inside a loop body: those of the body's first
    run. B1 traces a loop body once (nki-api.md §4.3), so a declaration in it is one tensor,
    and Python state its allocation function reads advances once per declaration, not per
    iteration (AWS's allocated SD attention adds each tile's size to a `cur_addr` counter in
    its loop body); trnsim runs the body per iteration, so later runs take the first one's."""
    if not st.loops:
        return blocks
    loc = capture_location()
    if loc is None:
        return blocks
    key = (loc.filename, loc.lineno,
           tuple((f.loc.filename, f.loc.lineno) if f.loc is not None else f.kind
                 for f in st.loops))
    return st.__dict__.setdefault("traced_direct", {}).setdefault(key, blocks)


def _direct_addresses(
    direct: Any, logical: tuple[int, ...], pdim: int, dtype: dt.DType
) -> list[tuple[int, int]]:
    """Every block's B1 address (start partition, element offset), validated, in row-major
    block order (one entry for a tensor without block dimensions)."""
    blocks = logical[:pdim]
    tile_free = [n for d, n in enumerate(logical) if d > pdim]
    fbytes = int(math.prod(tile_free)) * dtype.itemsize
    out = []
    for idx in np.ndindex(*blocks) if blocks else [()]:
        p, b = direct.address(tuple(int(i) for i in idx), logical[pdim], fbytes)
        if b % dtype.itemsize:
            raise ConstraintError(
                f"ncc.{direct.space}.{direct.kind}: byte address {b} is not "
                f"a multiple of the {dtype} element size"
            )
        out.append((p, b // dtype.itemsize))
    return out


# ---------------------------------------------------------------- nl creation functions


@api("nl.ndarray")
def ndarray(shape: Any, dtype: Any, *, buffer: Any = None, name: str = "") -> tensor:
    """A new tensor with undefined contents (NaN / 4 in the simulator)."""
    return allocate(shape, dtype, buffer, name or target_name(here()[0]))


def _fill(t: tensor, value: Any, loc: Any, loops: tuple) -> None:
    buf = t._buf
    if isinstance(buf, _spill.BlockSlots):  # each block is filled when it first lives
        buf.fill = value
        return
    f = buf.elems_per_partition(t.dtype)
    whole = View(buf, Layout(t.dtype, 0, (buf.partitions, f), (f, 1)))
    issue("memset", None, loc=loc, loops=loops, dst=whole, value=value)


def _filled(api_name: str, shape: Any, value: Any, dtype: Any, buffer: Any, name: str) -> tensor:
    _, st = context(api_name)
    loc, loops = here()
    space, direct = _buffers.resolve(buffer)
    if space not in ("sbuf", "psum"):
        raise b1_error(
            ConstraintError,
            "err_hbm_tensor_with_init_value_not_supported",
            f"{api_name}: Creating HBM tensor with init value is not supported "
            "(create it with nl.ndarray and nl.store the values)",
        )
    if direct is not None or getattr(st, "direct_alloc", False):
        raise b1_error(
            ConstraintError,
            "err_tensor_creation_on_scratchpad_with_init_value_not_supported",
            f"{api_name}: Creating SBUF/PSUM tensor with init value is not "
            "supported in allocated kernels",
        )
    t = allocate(shape, dtype, buffer, name or target_name(loc))
    _fill(t, value, loc, loops)
    return t


@api("nl.zeros")
def zeros(
    shape: Any, dtype: Any, *, buffer: Any = None, name: str = "", lazy_initialization: bool = False
) -> tensor:
    """A new on-chip tensor filled with 0 (memset). `lazy_initialization` (the compiler's own
    NKI dumps pass it) changes no value; a tensor stored block by block fills each block when it
    first lives either way."""
    return _filled("nl.zeros", shape, 0, dtype, buffer, name)


@api("nl.ones")
def ones(
    shape: Any, dtype: Any, *, buffer: Any = None, name: str = "", lazy_initialization: bool = False
) -> tensor:
    """A new on-chip tensor filled with 1 (memset)."""
    return _filled("nl.ones", shape, 1, dtype, buffer, name)


@api("nl.full")
def full(
    shape: Any,
    fill_value: Any,
    dtype: Any,
    *,
    buffer: Any = None,
    name: str = "",
    lazy_initialization: bool = False,
) -> tensor:
    """A new on-chip tensor filled with fill_value (memset)."""
    return _filled("nl.full", shape, fill_value, dtype, buffer, name)


def _like(a: Any, dtype: Any) -> tuple[tuple[int, ...], Any]:
    if not isinstance(a, tensor):
        raise ConstraintError(f"expected a tensor, got {type(a).__name__}")
    return a.shape, a.dtype if dtype is None else dtype


@api("nl.zeros_like")
def zeros_like(a: Any, dtype: Any = None, *, buffer: Any = None, name: str = "") -> tensor:
    """zeros with a's shape (and dtype unless given)."""
    shape, dtype = _like(a, dtype)
    return _filled("nl.zeros_like", shape, 0, dtype, buffer, name)


@api("nl.empty_like")
def empty_like(a: Any, dtype: Any = None, *, buffer: Any = None, name: str = "") -> tensor:
    """ndarray with a's shape (and dtype unless given)."""
    shape, dtype = _like(a, dtype)
    return allocate(shape, dtype, buffer, name or target_name(here()[0]))


@api("nl.rand")
def rand(shape: Any, dtype: Any = dt.float32, **kwargs: Any) -> tensor:
    """Uniform random values in [0, 1): Vector-engine random bits (nisa.rng), the top 24 kept
    (right_shift 8) and scaled by 2^-24, so every value is exact and below 1."""
    loc, loops = here()
    bits = allocate(shape, dt.uint32, None, "rand_bits")
    issue("rng", "vector", loc=loc, loops=loops, dst=bits.operand())
    issue(
        "tensor_scalar",
        None,
        loc=loc,
        loops=loops,
        dst=bits.operand(),
        data=bits.operand(),
        op0="right_shift",
        operand0=8,
        reverse0=False,
        op1=None,
        operand1=None,
        reverse1=False,
    )
    out = allocate(shape, dtype, kwargs.get("buffer"), target_name(loc))
    issue(
        "tensor_scalar",
        None,
        loc=loc,
        loops=loops,
        dst=out.operand(),
        data=bits.operand(),
        op0="multiply",
        operand0=2.0**-24,
        reverse0=False,
        op1=None,
        operand1=None,
        reverse1=False,
    )
    return out


@api("nl.random_seed")
def random_seed(seed: Any, *, mask: Any = None) -> None:
    """Seed the Vector-engine PRNG (nisa.set_rng_seed) from an int or a [1, 1] tile."""
    loc, loops = here()
    if isinstance(seed, tensor):
        src = seed
    else:
        src = allocate((1, 1), dt.uint32, None, "seed")
        issue("memset", None, loc=loc, loops=loops, dst=src.operand(), value=int(seed))
    issue("set_rng_seed", None, loc=loc, loops=loops, src_seeds=src.operand())


def _constant(api_name: str, array: np.ndarray, dtype: dt.DType, name: str) -> tensor:
    ctx, _ = context(api_name)
    key = ("constant", api_name, name, array.shape, dtype.name, array.tobytes())
    shared = ctx.extra["shared_allocs"]
    if key not in shared:
        shared[key] = ctx.device.hbm_from_array(array, dtype, name)
    return tensor.from_view(shared[key])


@api("nl.shared_constant")
def shared_constant(constant: Any, dtype: Any = None) -> tensor:
    """A constant tensor in shared HBM (a NumPy array, or the path of a .npy file)."""
    arr = np.load(constant) if isinstance(constant, str) else np.asarray(constant)
    dtype = resolve_dtype(arr.dtype if dtype is None else dtype)
    if arr.dtype == np.float64:
        arr = arr.astype(np.float32)
    try:
        return _constant("nl.shared_constant", arr, dtype, target_name(here()[0], "constant"))
    except KernelError:
        raise
    except (TypeError, ValueError) as e:
        raise ConstraintError(
            f"nl.shared_constant: cannot store {arr.dtype} values as {dtype}"
        ) from e


@api("nl.shared_identity_matrix")
def shared_identity_matrix(n: int, dtype: Any = dt.uint8) -> tensor:
    """An n x n identity matrix in shared HBM (load it to use it on chip)."""
    dtype = resolve_dtype(dtype)
    return _constant(
        "nl.shared_identity_matrix", np.eye(int(n), dtype=np.float32), dtype, f"identity_{n}"
    )
