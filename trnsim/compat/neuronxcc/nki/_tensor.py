"""The Beta-1 tensor (`nki.tensor`): a Buffer, the logical layout of the whole tensor, and an
affine access map that selects the view this object denotes.

Indexing never copies. Each base dimension d of an access is `consts[d] + sum_k coefs[d][k] *
i_k` over the access axes k (shape `shape`); basic indexing (ints, slices, nl.ds) and advanced
indexing (nl.arange / nl.mgrid expressions) both compose into this map, so any view is a
strided Layout. Bounds are checked only when an instruction uses the view, after its mask has
shrunk it (B1 loads such as `x[i * 128 + i_p, i_f]` with `mask=(i * 128 + i_p < n)` index past
the end by design). On chip, base dimension `pdim` (axis 0, or the nl.par_dim axis) lies on the
partitions. A tensor may also be *pending*: a value-returning call whose instruction waits to
learn its destination (see _emit). Knows nothing about instructions.
"""

from __future__ import annotations

import functools
from typing import Any

from trnsim import dtypes as dt
from trnsim.compat.neuronxcc.nki._errors import b1_error
from trnsim.compat.neuronxcc.nki._index import broadcast_shapes
from trnsim.errors import ConstraintError, KernelError, OutOfBoundsError
from trnsim.memory import Buffer, Layout, View, interned
from trnsim.program import capture_location

Box = list[tuple[int, int]]


def full_box(shape: tuple[int, ...]) -> Box:
    return [(0, n) for n in shape]


# The access geometry of a tensor (base layout, affine access map, box) decides its Layout and
# bounds; a kernel's loops repeat the same few, so both are computed once per geometry.
@functools.lru_cache(maxsize=8192)
def _access_layout(
    dtype: dt.DType,
    offset: int,
    strides: tuple[int, ...],
    consts: tuple[int, ...],
    coefs: tuple[tuple[int, ...], ...],
    box: tuple[tuple[int, int], ...],
) -> Layout:
    off = offset
    for d, st in enumerate(strides):
        off += st * (consts[d] + sum(c * lo for c, (lo, _) in zip(coefs[d], box, strict=True)))
    out = tuple(sum(strides[d] * coefs[d][k] for d in range(len(strides))) for k in range(len(box)))
    return interned(Layout(dtype, off, tuple(hi - lo for lo, hi in box), out))


@functools.lru_cache(maxsize=8192)
def _out_of_bounds(
    shape: tuple[int, ...],
    consts: tuple[int, ...],
    coefs: tuple[tuple[int, ...], ...],
    box: tuple[tuple[int, int], ...],
) -> tuple[int, int, int, int] | None:
    """(dimension, lowest, highest index, size) of the first dimension the access leaves."""
    if any(hi <= lo for lo, hi in box):
        return None
    for d, n in enumerate(shape):
        lo = hi = consts[d]
        for c, (a, b) in zip(coefs[d], box, strict=True):
            lo += min(c * a, c * (b - 1))
            hi += max(c * a, c * (b - 1))
        if lo < 0 or hi >= n:
            return d, lo, hi, n
    return None


class tensor:
    """A Beta-1 tensor or tile (HBM, SBUF or PSUM). Attributes: shape, dtype, ndim, itemsize,
    buffer, name; methods reshape, view, astype, broadcast_to, expand_dims, assert_shape."""

    __slots__ = (
        "__weakref__",
        "_base",
        "_buf",
        "_coefs",
        "_consts",
        "_dtype",
        "_inplace",
        "_pdim",
        "_pending",
        "_shape",
    )
    __array_priority__ = 100  # numpy scalars defer to our reflected operators

    def __init__(
        self,
        buf: Buffer | None,
        base: Layout | None,
        pdim: int | None,
        consts: tuple[int, ...],
        coefs: tuple[tuple[int, ...], ...],
        shape: tuple[int, ...],
        dtype: dt.DType,
    ):
        self._buf = buf
        self._base = base
        self._pdim = pdim
        self._consts = tuple(consts)  # tuples: the access geometry is a cache key
        self._coefs = tuple(map(tuple, coefs))
        self._shape = tuple(int(n) for n in shape)
        self._dtype = dtype
        self._pending = None
        self._inplace = False

    # ------------------------------------------------------------ construction
    @classmethod
    def whole(cls, buf: Buffer, base: Layout, pdim: int | None) -> tensor:
        """The identity access of a whole tensor."""
        n = len(base.shape)
        coefs = tuple(tuple(1 if k == d else 0 for k in range(n)) for d in range(n))
        return cls(buf, base, pdim, (0,) * n, coefs, base.shape, base.dtype)

    @classmethod
    def from_view(cls, view: View) -> tensor:
        pdim = 0 if view.buffer.on_chip else None
        return cls.whole(view.buffer, view.layout, pdim)

    def _derive(self, consts: list[int], coefs: list[list[int]], shape: tuple[int, ...]) -> tensor:
        return tensor(
            self._buf,
            self._base,
            self._pdim,
            tuple(consts),
            tuple(tuple(r) for r in coefs),
            shape,
            self._dtype,
        )

    # ------------------------------------------------------------ NKI attributes
    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def dtype(self) -> dt.DType:
        return self._dtype

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def itemsize(self) -> int:
        return self._dtype.itemsize

    @property
    def name(self) -> str:
        return self._buf.name if self._buf is not None else ""

    @property
    def space(self) -> str:
        """hbm, sbuf or psum (a pending tile reports where it will be allocated)."""
        if self._buf is None:
            return self._pending.buffer
        return self._buf.space

    @property
    def buffer(self) -> Any:
        from trnsim.compat.neuronxcc.nki import _buffers

        return _buffers.marker_of(self)

    @property
    def on_chip(self) -> bool:
        return self.space in ("sbuf", "psum")

    def __repr__(self) -> str:
        state = "pending" if self._pending is not None else self.space
        return f"tensor({self.name or '?'}: {self._dtype}@{state}{list(self._shape)})"

    def __len__(self) -> int:
        return self._shape[0] if self._shape else 1

    def __bool__(self) -> bool:
        # err_dynamic_control_flow_not_supported is about a tile's *value* (its documented
        # example branches on nl.load(a)). An HBM tensor handle, e.g. an optional kernel
        # argument, is truthy like any Python object: AWS's Beta-1 tensor_scalar_cumulative
        # example loads `imm1` only `if imm1`. A `while` on it would never end: refused.
        if self._pending is None and not self.on_chip and not _in_while():
            return True
        raise _truth_value_error()

    def __iter__(self) -> Any:
        raise b1_error(
            ConstraintError,
            "err_dynamic_control_flow_not_supported",
            "a tile cannot be iterated in Python; index it with nl.arange or loop "
            "with nl.affine_range",
        )

    __hash__ = object.__hash__

    # ------------------------------------------------------------ materialization
    def _materialize(self) -> None:
        from trnsim.compat.neuronxcc.nki import _emit

        _emit.materialize(self)

    def _ready(self) -> tensor:
        """This tensor with storage (a pending result is materialized into a fresh tile)."""
        if self._pending is not None:
            self._materialize()
        return self

    # ------------------------------------------------------------ access geometry
    def partition_axis(self) -> int | None:
        """The access axis that walks the partitions (on chip), if any."""
        if self._pdim is None:
            return None
        row = self._coefs[self._pdim]
        axes = [k for k, c in enumerate(row) if c and self._shape[k] > 1]
        return axes[0] if axes else None

    def layout(self, box: Box | None = None) -> Layout:
        """The strided Layout of the access restricted to `box` (default: all of it)."""
        base = self._base
        box_key = tuple(box) if box else tuple(full_box(self._shape))
        return _access_layout(
            self._dtype, base.offset, base.strides, self._consts, self._coefs, box_key
        )

    def check_bounds(self, box: Box | None = None) -> None:
        """B1's trace-time bounds check per tensor dimension."""
        box_key = tuple(box) if box else tuple(full_box(self._shape))
        bad = _out_of_bounds(self._base.shape, self._consts, self._coefs, box_key)
        if bad is not None:
            d, lo, hi, n = bad
            raise b1_error(
                OutOfBoundsError,
                "err_tensor_access_out_of_bound",
                f"Out-of-bound access for tensor `{self.name or '?'}` on "
                f"dimension {d}: index range [{lo}, {hi}] exceed dimension "
                f"size of {n}",
            )

    def operand(self, box: Box | None = None, mode: str = "readwrite") -> View:
        """The operand View an instruction reads or writes (bounds checked). `mode` (read,
        write, readwrite) matters to a tensor stored block by block (_spill.BlockSlots)."""
        self._ready()
        self.check_bounds(box)
        buf = self._buf
        if type(buf) is not Buffer:
            return buf.view(self.layout(box), mode)
        return View(buf, self.layout(box))

    def same_access(self, other: tensor) -> bool:
        return (
            self._buf is other._buf
            and self._consts == other._consts
            and self._coefs == other._coefs
            and self._shape == other._shape
            and self._dtype == other._dtype
        )

    # ------------------------------------------------------------ indexing
    def __getitem__(self, key: Any) -> Any:
        from trnsim.compat.neuronxcc.nki import _subscript

        try:
            return _subscript.index(self._ready(), key)
        except KernelError as e:
            raise e.with_loc(capture_location()) from None

    # ------------------------------------------------------------ tile checks
    def as_tile(self, api: str, operand: str) -> tensor:
        """Require an on-chip tile whose axis 0 walks the partitions and every free axis stays
        within a partition (same free pattern in every partition)."""
        self._ready()
        if not self.on_chip:
            raise b1_error(
                ConstraintError,
                "err_unsupported_memory",
                f"Expected operand '{operand}' of '{api}' to be in address space "
                f"'psum|sbuf', but got a tile in '{self.space}' instead.",
            )
        if self.ndim < 1:
            raise ConstraintError(f"{api}: operand '{operand}' is a scalar access")
        pax = self.partition_axis()
        if (pax not in (None, 0)) or (
            pax is None and self._coefs[self._pdim][0] == 0 and self._shape[0] > 1
        ):
            raise b1_error(
                ConstraintError,
                "err_failed_to_infer_tile_from_local_tensor",
                f"{api}: failed to infer tile from tensor `{self.name or '?'}` "
                f"{list(self._shape)}: the first dimension of the tile is not the "
                "partition dimension of the tensor",
            )
        if self._shape[0] > 1:
            for d, row in enumerate(self._coefs):
                if d != self._pdim and row[0]:
                    raise ConstraintError(
                        f"{api}: operand '{operand}' (`{self.name}`) walks "
                        "a free dimension along its partition axis; all "
                        "partitions must use the same free-dim pattern"
                    )
        if self._shape[0] > 128:
            raise b1_error(
                ConstraintError,
                "err_num_partition_exceed_arch_limit",
                f"{api}: number of partitions {self._shape[0]} of operand "
                f"'{operand}' exceed architecture limitation of 128.",
            )
        return self

    # ------------------------------------------------------------ views of the access
    def _axes_view(
        self,
        perm: tuple[int, ...] | None = None,
        insert: int | None = None,
        shape: tuple[int, ...] | None = None,
    ) -> tensor:
        """A permuted (perm), axis-inserted (insert) or stride-0 broadcast (shape) access."""
        consts = list(self._consts)
        coefs = [list(r) for r in self._coefs]
        cur = self._shape
        if perm is not None:
            coefs = [[r[k] for k in perm] for r in coefs]
            cur = tuple(cur[k] for k in perm)
        if insert is not None:
            for r in coefs:
                r.insert(insert, 0)
            cur = (*cur[:insert], 1, *cur[insert:])
        if shape is not None:
            lead = len(shape) - len(cur)
            coefs = [[0] * lead + r for r in coefs]
            old = (1,) * lead + tuple(cur)
            for r in coefs:  # a size-1 axis stretched to n reads its one element n times
                for j, (m, n) in enumerate(zip(old, shape, strict=True)):
                    if m == 1 and n != 1:
                        r[j] = 0
            cur = tuple(shape)
        return self._derive(consts, coefs, cur)

    def broadcast_view(self, shape: tuple[int, ...]) -> tensor:
        """Stride-0 view of this access broadcast to `shape` (NumPy rules; no copy)."""
        shape = tuple(shape)
        out = broadcast_shapes(self._shape, shape, what=f"broadcast of `{self.name}`")
        if out != shape:
            raise b1_error(
                ConstraintError,
                "err_param_shape_incompatible_with_numpy",
                f"cannot broadcast `{self.name or '?'}` {list(self._shape)} to {list(shape)}",
            )
        return self._axes_view(shape=shape)

    def permuted(self, perm: tuple[int, ...]) -> tensor:
        return self._axes_view(perm=perm)

    def with_axis(self, axis: int) -> tensor:
        return self._axes_view(insert=axis)

    # ------------------------------------------------------------ NKI methods
    def reshape(self, shape: Any, *more: int) -> tensor:
        from trnsim.compat.neuronxcc.nki import _views

        shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape, *more)
        try:
            return _views.reshape(self._ready(), tuple(int(s) for s in shape))
        except KernelError as e:  # at the kernel's line, as indexing errors are
            raise e.with_loc(capture_location()) from None

    def view(self, dtype: Any) -> tensor:
        from trnsim.compat.neuronxcc.nki import _views

        try:
            return _views.bitcast(self._ready(), dtype)
        except KernelError as e:
            raise e.with_loc(capture_location()) from None

    def expand_dims(self, axis: int) -> tensor:
        axis = int(axis)
        if axis < 0:
            axis += self.ndim + 1
        if not 0 <= axis <= self.ndim:
            raise ConstraintError(
                f"expand_dims: axis {axis} out of range for a {self.ndim}-D tensor"
            )
        return self._ready().with_axis(axis)

    def broadcast_to(self, shape: Any) -> tensor:
        from trnsim.compat.neuronxcc.nki import language

        return language.broadcast_to(self, shape=shape)

    def astype(self, dtype: Any) -> tensor:
        from trnsim.compat.neuronxcc.nki import language

        return language.copy(self, dtype=dtype)

    def assert_shape(self, shape: Any) -> tensor:
        if tuple(shape) != self._shape:
            raise b1_error(
                ConstraintError,
                "err_annotation_shape_mismatch",
                f"shape of `{self.name or '?'}{list(self._shape)}` does not match "
                f"the expected shape of {list(shape)}",
            )
        return self

    # ------------------------------------------------------------ assignment
    def __setitem__(self, key: Any, value: Any) -> None:
        from trnsim.compat.neuronxcc.nki import _assign

        _assign.assign_item(self, key, value)

    def _inplace_op(self, value: Any, op: str) -> tensor:
        from trnsim.compat.neuronxcc.nki import _assign

        return _assign.accumulate(self, value, op)

    def __iadd__(self, value: Any) -> tensor:
        return self._inplace_op(value, "add")

    def __isub__(self, value: Any) -> tensor:
        return self._inplace_op(value, "subtract")

    def __imul__(self, value: Any) -> tensor:
        return self._inplace_op(value, "multiply")

    def __itruediv__(self, value: Any) -> tensor:
        return self._inplace_op(value, "divide")


def _in_while() -> bool:
    """True if the user's statement asking a truth value is a `while`."""
    loc = capture_location()
    return loc is not None and loc.code.startswith("while")


def _truth_value_error() -> KernelError:
    """The B1 error for asking a tile's truth value, by the statement that asked."""
    loc = capture_location()
    code = loc.code if loc is not None else ""
    if code.startswith("while"):
        return b1_error(
            ConstraintError,
            "err_while_loop_requires_unconditional_entry",
            "while loops on tensor values are not supported in NKI; use the "
            "do-while pattern: cond = nt.scalar(True), then `while cond:` with cond "
            "updated from a 1x1 tile inside the body",
            loc,
        )
    if code.startswith(("if", "elif")) or " if " in code:
        return b1_error(
            ConstraintError,
            "err_dynamic_control_flow_not_supported",
            "dynamic control-flow depending on tensor value is not supported (the "
            "value of a tile is not known when the kernel is traced)",
            loc,
        )
    return b1_error(
        ConstraintError,
        "err_ambiguous_tensor_truth_value",
        "Cannot evaluate truth value of a multi-element tensor/array (use nl."
        "logical_and / nl.all instead of and, or, not)",
        loc,
    )
