"""nki.language (current API): dtypes, loops, device_print, program identity, tile_size.

Re-exported here: buffers and tensor creation (trnsim.nki.creation), the convenience wrappers
nl.add, nl.matmul, nl.softmax, ... (trnsim.nki.lang_ops, lang_data, lang_reduce), the 0.7
tile/block grids (trnsim.nki.grids), grid-shaped storage and stream pools
(trnsim.nki.grid_storage) and the device loops (trnsim.nki.loops).
"""

from __future__ import annotations

import contextlib
import inspect
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np

from trnsim import dtypes as _dt
from trnsim.errors import ConstraintError, KernelError
from trnsim.nki.context import current, maybe_current, scoped_marker
from trnsim.nki.creation import (  # noqa: F401
    MemoryRegion,
    _allocate_hbm,
    _region,
    empty_like,
    full,
    hbm,
    is_hbm,
    is_on_chip,
    is_psum,
    is_sbuf,
    ndarray,
    ones,
    private_hbm,
    psum,
    rand,
    random_seed,
    sbuf,
    shared_constant,
    shared_hbm,
    shared_identity_matrix,
    zeros,
    zeros_like,
)

# ---------------------------------------------------------------- dtypes
from trnsim.nki.language.dtypes import *  # noqa: F403
from trnsim.nki.tensor import DynSlice, NkiTensor, index_values, is_register
from trnsim.nki.views import index_value
from trnsim.program import capture_location


class _NKIObjectType(type):
    """Builds NKIObject instances: by the class's own __init__ when it takes the arguments,
    else from the fields (nki-library decorates field-only classes like `section_idx = None`
    with @dataclass, whose generated __init__ takes no arguments, and then passes them)."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if "__dataclass_fields__" in vars(cls) and (args or kwargs):
            try:
                inspect.signature(cls.__init__).bind(None, *args, **kwargs)
            except TypeError:
                obj = cls.__new__(cls)
                NKIObject.__init__(obj, *args, **kwargs)
                return obj
        return super().__call__(*args, **kwargs)


class NKIObject(metaclass=_NKIObjectType):
    """Base class for user classes passed to or built in kernels (dataclass-like, == by value).

    "Simple classes deriving from NKIObject (dataclass-like, structural ==)" (nki-api.md
    §5.2): without an __init__ of its own (or @dataclass), a subclass is built from its
    annotated fields like a dataclass (keyword or positional arguments, class defaults,
    __post_init__; a field given no value and no default stays unset until assigned), as
    nki-library's argument classes expect
    (`RmsNormQuantKernelArgs(lower_bound=0.1)`); plain class attributes with defaults
    (`section_idx = None`) are accepted as keyword arguments too, also when @dataclass gave
    the class an __init__ without them (_NKIObjectType).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        names = _field_names(type(self))
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__}() takes at most {len(names)} positional "
                            f"arguments ({', '.join(names) or 'no fields'}), got {len(args)}")
        values = dict(zip(names[: len(args)], args, strict=True))
        attrs = _class_attributes(type(self))
        bad = [k for k in kwargs if k in values or (k not in names and k not in attrs)]
        if bad:
            raise TypeError(f"{type(self).__name__}(): unexpected or repeated argument "
                            f"{bad[0]!r} (fields: {', '.join(names) or 'none'})")
        values.update(kwargs)
        for name in [k for k in kwargs if k not in names]:  # un-annotated class attributes
            setattr(self, name, kwargs[name])
        for name in names:
            if name in values:
                setattr(self, name, values[name])
            elif hasattr(type(self), name):
                setattr(self, name, getattr(type(self), name))
            # else: left unset, to be assigned later (reading it first is an AttributeError).
            # Unlike a dataclass, an NKIObject need not be given every annotated field:
            # nki-library's production kernels build their dimension records with some fields
            # and set the rest in a method (moe_cte's DimensionSizes: I_TP_sharded, GUP_N_TILES
            # in derive_all_dims; mlp_tkg's constants omit remainderIFused).
        post = getattr(self, "__post_init__", None)
        if post is not None:
            post()

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({fields})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return vars(self) == vars(other)

    __hash__ = object.__hash__


def _class_attributes(cls: type) -> set[str]:
    """Plain (non-dunder, non-callable) class attributes: `section_idx = None` is a field too."""
    return {k for klass in cls.__mro__[:-1] for k, v in vars(klass).items()
            if not k.startswith("__") and not callable(v)
            and not isinstance(v, (staticmethod, classmethod, property))}


def _field_names(cls: type) -> list[str]:
    """Annotated class attributes over the MRO, base classes first (dataclass order)."""
    names: list[str] = []
    for klass in reversed(cls.__mro__):
        for name, ann in inspect.get_annotations(klass).items():
            if name not in names and "ClassVar" not in str(ann):
                names.append(name)
    return names


# ---------------------------------------------------------------- ranges
class _Range:
    """A loop iterator recording its nesting (loop id, kind, iteration) for the program record."""

    def __init__(self, kind: str, start: Any, stop: Any = None, step: Any = 1):
        if stop is None:
            start, stop = 0, start
        self.kind = kind
        self.range = range(_scalar(start), _scalar(stop), _scalar(step))

    def __len__(self) -> int:
        return len(self.range)

    def __iter__(self) -> Iterator[int]:
        ctx = current(f"nl.{self.kind}")
        loop_id = ctx.next_loop_id
        ctx.next_loop_id += 1
        depth = len(ctx.loops)
        try:
            for i in self.range:
                del ctx.loops[depth:]
                ctx.loops.append((loop_id, self.kind, i))
                yield i
        finally:
            del ctx.loops[depth:]


def _scalar(x: Any, what: str = "loop bound", runtime: bool = True) -> int:
    """A loop bound: an integer, or (runtime=True) the current value of a register or a 1x1
    tensor."""
    if isinstance(x, (int, np.integer)):
        return int(x)
    if runtime and (isinstance(x, NkiTensor) or is_register(x)):
        return int(index_values(x).reshape(-1)[0])
    try:
        return index_value(x, what)
    except KernelError as e:
        raise e.with_loc(capture_location()) from None


def affine_range(start: Any, stop: Any = None, step: Any = 1) -> _Range:
    """Iterations with no loop-carried dependency (GA: an unrolled range, deprecated)."""
    return _Range("affine_range", start, stop, step)


def sequential_range(start: Any, stop: Any = None, step: Any = 1) -> _Range:
    """Iterations in order; loop-carried dependencies allowed."""
    return _Range("sequential_range", start, stop, step)


def static_range(start: Any, stop: Any = None, step: Any = 1) -> _Range:
    """Fully unrolled at trace time."""
    return _Range("static_range", start, stop, step)


@contextlib.contextmanager
def no_reorder() -> Iterator[None]:
    """Keep program order inside the block: instructions carry a ("no_reorder") loop marker
    that the scheduler honours; values are unaffected (they are computed in order anyway)."""
    with scoped_marker(current("nl.no_reorder"), "no_reorder"):
        yield


def ds(start: Any, size: int) -> DynSlice:
    """Dynamic slice: `size` elements from `start` (an integer or a runtime register)."""
    start = start if is_register(start) else _scalar(start, "nl.ds: start")
    return DynSlice(start, _scalar(size, "nl.ds: size", runtime=False))


# ---------------------------------------------------------------- debugging
def device_print(print_prefix: str, tensor: Any) -> None:
    """Print the prefix and the tensor's current values to stdout (simulator behaviour)."""
    if not isinstance(print_prefix, str):
        raise ConstraintError(
            f"nl.device_print: the prefix must be a constant string, got "
            f"{type(print_prefix).__name__}",
            capture_location(),
        )
    current("nl.device_print")
    if isinstance(tensor, NkiTensor):
        with np.printoptions(threshold=sys.maxsize if tensor.size <= 4096 else 1000):
            body = np.array2string(_printable(tensor))
    else:
        body = repr(tensor)
    sys.stdout.write(f"{print_prefix} {body}\n")


def _printable(t: NkiTensor) -> np.ndarray:
    if t.dtype.kind in ("int", "uint", "bool", "packed"):
        return t.read()
    return _dt.to_float32(t.read())


# ---------------------------------------------------------------- program identity
def program_id(axis: int = 0) -> int:
    ctx = current("nl.program_id")
    if not ctx.program_id:
        return 0
    if not 0 <= axis < len(ctx.program_id):
        raise ConstraintError(
            f"nl.program_id: axis {axis} is outside the launch grid of rank {len(ctx.program_id)}",
            capture_location(),
        )
    return ctx.program_id[axis]


def num_programs(axes: Any = None) -> int:
    ctx = current("nl.num_programs")
    grid = ctx.grid or (1,)
    if axes is None:
        return int(np.prod(grid))
    if isinstance(axes, int):
        axes = (axes,)
    n = 1
    for a in axes:
        if not 0 <= a < len(grid):
            raise ConstraintError(
                f"nl.num_programs: axis {a} is outside the launch grid of rank {len(grid)}",
                capture_location(),
            )
        n *= grid[a]
    return n


def program_ndim() -> int:
    return len(current("nl.program_ndim").grid)


# ---------------------------------------------------------------- tile sizes
class _TileSize:
    """nl.tile_size: hardware tile limits of the target chip (read at access time)."""

    def __getattr__(self, name: str) -> int:
        from trnsim.nki.runner import resolve_chip

        ctx = maybe_current()
        chip = ctx.chip if ctx is not None else resolve_chip(None)
        try:
            return chip.tile_size[name]
        except KeyError:
            raise AttributeError(
                f"nl.tile_size has no attribute {name!r} (known: "
                f"{', '.join(sorted(chip.tile_size))})"
            ) from None

    def __dir__(self) -> list[str]:
        from trnsim.nki.runner import resolve_chip

        ctx = maybe_current()
        chip = ctx.chip if ctx is not None else resolve_chip(None)
        return sorted(chip.tile_size)


tile_size = _TileSize()

# ---------------------------------------------------------------- re-exports
from trnsim.nki.grid_storage import NkiStreamBuffers, alloc_stream_buffers  # noqa: E402
from trnsim.nki.grids import (  # noqa: E402
    NkiBlockGrid,
    NkiGrid,
    NkiTileGrid,
    alloc_blocks,
    alloc_tiles,
    blocks,
    tiles,
)
from trnsim.nki.lang_data import *  # noqa: E402, F403
from trnsim.nki.lang_ops import *  # noqa: E402, F403
from trnsim.nki.lang_reduce import *  # noqa: E402, F403
from trnsim.nki.loops import dynamic_range, fori_loop, while_loop  # noqa: E402

_ = (
    dynamic_range,
    fori_loop,
    while_loop,
    NkiBlockGrid,
    NkiGrid,
    NkiStreamBuffers,
    NkiTileGrid,
    alloc_blocks,
    alloc_stream_buffers,
    alloc_tiles,
    blocks,
    tiles,
)
