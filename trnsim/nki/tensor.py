"""NkiTensor: the user's handle on a tensor in HBM, SBUF or PSUM, with NKI's view methods.

Views never copy: each is a new Layout (offset, shape, strides in elements) on one Buffer,
plus, for runtime-indexed views, `NkiTensor.dynamic`: a DynamicOffset (documented in
trnsim.nki.tensor_dynamic, re-exported here). The layout algebra lives in trnsim.nki.views;
this module adds the user-facing checks.
"""

from __future__ import annotations

import ast
import inspect
import linecache
import textwrap
from typing import Any

from trnsim import dtypes as dt
from trnsim.errors import ConstraintError
from trnsim.memory import Buffer, Layout, View, check_bounds, interned
from trnsim.nki import view_shapes as vs
from trnsim.nki import views as vw
from trnsim.nki.dynamic_offset import (
    DynamicOffset,
    as_dtype,
    index_values,
    is_index_tensor,
    is_register,
    user_errors,
)
from trnsim.nki.tensor_dynamic import DynamicAccess
from trnsim.nki.tensor_python import PythonGuards
from trnsim.nki.views import DynSlice, index_value
from trnsim.program import SourceLocation

__all__ = ["DynSlice", "DynamicOffset", "NkiTensor", "as_dtype", "index_values", "is_register"]


class Shape(tuple):
    """A tensor shape: a tuple that also compares equal to a list (NKI docs compare both)."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, list):
            other = tuple(other)
        return tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = tuple.__hash__


class NkiTensor(PythonGuards, DynamicAccess, View):
    """A tensor view. NKI attributes: shape, dtype, strides, offset, buffer, ndim, size, name.

    `buffer` is the memory block (trnsim.memory.Buffer); it compares equal to NKI's buffer
    markers (`t.buffer == nl.sbuf`) and is accepted wherever NKI takes a buffer.
    """

    __slots__ = ("dynamic",)

    def __init__(self, buffer: Buffer, layout: Layout, dynamic: DynamicOffset | None = None):
        self.buffer = buffer  # View.__init__, inlined: views are made per instruction
        self.layout = layout
        self.dynamic = dynamic

    # ---------------------------------------------------------------- attributes
    @property
    def shape(self) -> Shape:
        return Shape(self.layout.shape)

    @property
    def on_chip(self) -> bool:
        return self.buffer.on_chip

    @property
    def memory_kind(self) -> str:
        return self.buffer.kind

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    def __repr__(self) -> str:
        dyn = f", dynamic {self.dynamic.kind}" if self.dynamic else ""
        return (
            f"NkiTensor({self.buffer.name or '?'}: {self.dtype}@{self.buffer.space}"
            f"{list(self.shape)}{dyn})"
        )

    def __len__(self) -> int:
        return self.shape[0] if self.shape else 1

    def _derive(
        self, layout: Layout, dynamic: DynamicOffset | None = None, what: str = "view"
    ) -> NkiTensor:
        layout = interned(layout)
        check_bounds(self.buffer, layout, what)
        return type(self)(self.buffer, layout, dynamic)

    def _elems_per_partition(self, dtype: dt.DType | None = None) -> int | None:
        return self.buffer.elems_per_partition(dtype or self.dtype) if self.on_chip else None

    def _dyn_dim(self) -> int | None:
        return self.dynamic.dim if self.dynamic is not None else None

    def _moved_dynamic(self, kept: list[int]) -> DynamicOffset | None:
        """The dynamic descriptor after a view whose result dims came from source dims `kept`."""
        dyn = self.dynamic
        if dyn is None or dyn.dim is None:
            return dyn
        if dyn.dim not in kept:
            raise ConstraintError(
                f"{self.buffer.label}: dimension {dyn.dim} takes part in "
                f"the indirection ({dyn.kind} offset) and cannot be removed"
            )
        return dyn.moved(kept.index(dyn.dim))

    def _check_not_indirect_dim(self, d: int, op: str) -> None:
        if self.dynamic is not None and self.dynamic.dim == d:
            raise ConstraintError(
                f"{op} of {self.buffer.label}: dimension {d} takes part in the "
                f"indirection ({self.dynamic.kind} offset) and cannot be "
                "changed"
            )

    def _check_free_dim(self, d: int, op: str) -> None:
        if d == 0 and (self.on_chip or self._dyn_dim() == 0):
            where = "on-chip tensors" if self.on_chip else "indirect views"
            raise ConstraintError(
                f"{op} of {self.buffer.label}: dimension 0 is the partition "
                f"dimension; {where} cannot {op} it"
            )

    # ---------------------------------------------------------------- indexing
    @user_errors
    def __getitem__(self, key: Any) -> NkiTensor:
        if self.dynamic is None:
            simple = vw.indexed(self.layout, key, self.buffer.on_chip)
            if simple is not None:
                return self._derive(simple, None, "index")
        key_list = vw.normalize_key(key, self.ndim)
        dyn_dims = [d for d, k in enumerate(key_list) if is_index_tensor(k)]
        if dyn_dims:
            return self._getitem_dynamic(key_list, dyn_dims)
        reg_dims = [
            d
            for d, k in enumerate(key_list)
            if is_register(k) or (isinstance(k, DynSlice) and is_register(k.start))
        ]
        if reg_dims:
            return self._getitem_register(key_list, reg_dims)
        for d, k in enumerate(key_list):
            if self._dyn_dim() == d and not (isinstance(k, slice) and k == slice(None)):
                self._check_not_indirect_dim(d, "indexing")
        lay, kept = vw.index_layout(self.layout, tuple(key_list), self.on_chip, self.buffer.label)
        return self._derive(lay, self._moved_dynamic(kept), "index")

    @user_errors
    def slice(self, dim: int, start: int, end: int, step: int = 1) -> NkiTensor:
        """Elements start..end-1 (step `step`) of dimension `dim`."""
        d = vw._dim(dim, self.ndim, "slice: dimension")
        self._check_not_indirect_dim(d, "slice")
        start, end, step = index_value(start), index_value(end), index_value(step)
        lay = vw.slice_dim(self.layout, d, start, end, step, self.buffer.label)
        return self._derive(lay, self.dynamic, "slice")

    @user_errors
    def select(self, dim: int, index: Any) -> NkiTensor:
        """Element `index` of dimension `dim`, the dimension removed; a tensor index is dynamic."""
        d = vw._dim(dim, self.ndim, "select: dimension")
        if is_index_tensor(index) or is_register(index):
            return self._select_dynamic(d, index)
        self._check_not_indirect_dim(d, "select")
        if d == 0 and self.on_chip:
            raise ConstraintError(
                f"select of {self.buffer.label}: dimension 0 is the partition "
                "dimension of an on-chip tensor; use slice(0, i, i + 1)"
            )
        lay = vw.select_dim(self.layout, d, index_value(index), self.buffer.label)
        kept = [k for k in range(self.ndim) if k != d]
        return self._derive(lay, self._moved_dynamic(kept), "select")

    @user_errors
    def permute(self, dims: Any) -> NkiTensor:
        """Reorder dimensions; on chip dims[0] must stay 0."""
        dims = vs.check_permutation(dims, self.ndim)
        if (self.on_chip or self._dyn_dim() == 0) and dims and dims[0] != 0:
            raise ConstraintError(
                f"permute of {self.buffer.label}: dims[0] must be 0 (the partition "
                f"dimension stays outermost), got {dims}"
            )
        return self._derive(
            vs.permute(self.layout, dims), self._moved_dynamic(list(dims)), "permute"
        )

    @user_errors
    def broadcast(self, dim: int, size: int) -> NkiTensor:
        """Repeat a size-1 dimension `size` times (stride 0)."""
        d = vw._dim(dim, self.ndim, "broadcast: dimension")
        self._check_free_dim(d, "broadcast")
        return self._derive(
            vs.broadcast(self.layout, d, index_value(size), self.buffer.label),
            self.dynamic,
            "broadcast",
        )

    @user_errors
    def expand_dim(self, dim: int) -> NkiTensor:
        """Insert a size-1 dimension at position `dim`."""
        d = vw._dim(dim, self.ndim, "expand_dim: dimension", allow_end=True)
        self._check_free_dim(d, "expand_dim")
        kept = [*list(range(d)), -1, *list(range(d, self.ndim))]
        return self._derive(vs.expand_dim(self.layout, d), self._moved_dynamic(kept), "expand_dim")

    @user_errors
    def squeeze_dim(self, dim: int) -> NkiTensor:
        """Remove a size-1 dimension."""
        d = vw._dim(dim, self.ndim, "squeeze_dim: dimension")
        self._check_free_dim(d, "squeeze_dim")
        self._check_not_indirect_dim(d, "squeeze_dim")
        kept = [k for k in range(self.ndim) if k != d]
        return self._derive(
            vs.squeeze_dim(self.layout, d, self.buffer.label),
            self._moved_dynamic(kept),
            "squeeze_dim",
        )

    @user_errors
    def reshape_dim(self, dim: int, shape: Any) -> NkiTensor:
        """Split dimension `dim` into `shape` (one -1 allowed)."""
        d = vw._dim(dim, self.ndim, "reshape_dim: dimension")
        shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
        if len(shape) != 1:
            self._check_free_dim(d, "reshape_dim")
            self._check_not_indirect_dim(d, "reshape_dim")
        lay = vs.reshape_dim(self.layout, d, shape, self.buffer.label)
        kept = list(range(d)) + [d] + [-1] * (len(shape) - 1) + list(range(d + 1, self.ndim))
        return self._derive(lay, self._moved_dynamic(kept), "reshape_dim")

    @user_errors
    def flatten_dims(self, start_dim: int, end_dim: int) -> NkiTensor:
        """Merge dimensions start_dim..end_dim (inclusive); they must be contiguous."""
        s = vw._dim(start_dim, self.ndim, "flatten_dims: start dimension")
        e = vw._dim(end_dim, self.ndim, "flatten_dims: end dimension")
        self._check_free_dim(s, "flatten_dims")
        for k in range(s, e + 1):
            self._check_not_indirect_dim(k, "flatten_dims")
        lay = vs.flatten_dims(self.layout, s, e, self.buffer.label)
        kept = [*list(range(s)), s, *list(range(e + 1, self.ndim))]
        return self._derive(lay, self._moved_dynamic(kept), "flatten_dims")

    @user_errors
    def reshape(self, shape: Any, *more: int) -> NkiTensor:
        """Same elements, new shape (row-major order); the partition size stays on chip."""
        shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape, *more)
        dd = self._dyn_dim()
        if dd is not None:
            if dd != 0 or not shape or index_value(shape[0]) != self.shape[0]:
                raise ConstraintError(
                    f"reshape of {self.buffer.label}: an indirect view must keep "
                    f"its indirect dimension 0 ({self.shape[0]})"
                )
            head = Layout(self.dtype, self.offset, self.shape[1:], self.strides[1:])
            sub = vs.reshape(head, shape[1:], False, self.buffer.label)
            lay = Layout(
                self.dtype,
                self.offset,
                (self.shape[0], *sub.shape),
                (self.strides[0], *sub.strides),
            )
            return self._derive(lay, self.dynamic, "reshape")
        return self._derive(
            vs.reshape(self.layout, shape, self.on_chip, self.buffer.label), self.dynamic, "reshape"
        )

    @user_errors
    def rearrange(
        self, src_pattern: Any, dst_pattern: Any, fixed_sizes: dict[str, int] | None = None
    ) -> NkiTensor:
        """einops-style split / reorder / merge of dimensions.

        t.rearrange(('b', ('h', 'w')), ('b', 'w', 'h'), {'h': 4}) splits dim 1 into (h, w)
        and swaps them; string patterns ('b (h w)') work too.
        """
        src, dst = vs.parse_pattern(src_pattern), vs.parse_pattern(dst_pattern)
        if len(src) != self.ndim:
            raise ConstraintError(
                f"rearrange of {self.buffer.label}: source pattern {src} has "
                f"{len(src)} dimensions, the tensor has {self.ndim}"
            )
        fixed = dict(fixed_sizes or {})
        src_atoms, dst_atoms = vs.atoms(src), vs.atoms(dst)
        if sorted(src_atoms) != sorted(dst_atoms):
            raise ConstraintError(f"rearrange: names {dst_atoms} do not match {src_atoms}")
        t = self
        pos = 0
        for e in src:
            if isinstance(e, tuple):
                sizes = tuple(index_value(fixed.get(n, -1)) for n in e)
                t = t.reshape_dim(pos, sizes)
                pos += len(e)
            else:
                pos += 1
        t = t.permute(tuple(src_atoms.index(n) for n in dst_atoms))
        pos = 0
        for e in dst:
            if isinstance(e, tuple):
                if len(e) > 1:
                    t = t.flatten_dims(pos, pos + len(e) - 1)
                pos += 1
            else:
                pos += 1
        return t

    @user_errors
    def view(self, dtype: Any) -> NkiTensor:
        """Reinterpret the bits as `dtype`; the last dimension scales by the size ratio."""
        new = as_dtype(dtype)
        if self.dynamic is not None:
            raise ConstraintError(f"view of {self.buffer.label}: not supported on an indirect view")
        if self.on_chip and self.buffer.nbytes % new.itemsize:
            raise ConstraintError(
                f"view of {self.buffer.label} as {new.name}: {self.buffer.nbytes} "
                f"bytes per partition is not a multiple of {new.itemsize}"
            )
        lay = vs.view_dtype(self.layout, new, self._elems_per_partition(), self.buffer.label)
        return self._derive(lay, None, "view")

    reinterpret_cast = view

    def astype(self, dtype: Any) -> NkiTensor:
        """Alias of view(dtype) for same-size dtypes (B1 spelling)."""
        return self.view(dtype)

    # ---------------------------------------------------------------- access patterns
    def get_pattern(self) -> list[list[int]]:
        """The view's access pattern as [[stride, count], ...], outermost first."""
        return [[int(s), int(n)] for n, s in zip(self.shape, self.strides, strict=True)]

    def is_contiguous(self) -> bool:
        return vs.is_contiguous(self.layout)

    def is_indirect(self) -> bool:
        return self.dynamic is not None


def check_ga_outputs(result: Any, kernel: Any = "") -> None:
    """GA kernels return shared-HBM tensors (nki-api.md §2.1): an on-chip tensor is an error
    pointing at the kernel's `return` line. A returned nl.hbm / nl.private_hbm tensor is
    accepted with a SimulationWarning: the NKI 0.3.0 migration guide says it fails to
    compile, but AWS's own optimization tutorial and scheduling how-to return one, so what
    hardware does is in doubt. `kernel` is the kernel function (or just its name)."""
    bad = _bad_output(result)
    if bad is None:
        return
    name = kernel if isinstance(kernel, str) else getattr(kernel, "__name__", "")
    if not bad.buffer.on_chip:
        import warnings

        from trnsim.errors import SimulationWarning

        loc = None if isinstance(kernel, str) else return_location(kernel)
        text = (f"kernel {name} returned {bad.buffer.label}, a private-HBM (nl.hbm) tensor: the "
                "NKI 0.3.0 migration guide says such outputs fail to compile (allocate "
                "outputs with buffer=nl.shared_hbm), though AWS's optimization tutorial "
                "returns one; trnsim accepts it")
        if loc is not None:
            warnings.warn_explicit(text, SimulationWarning, loc.filename, loc.lineno)
        else:
            warnings.warn(text, SimulationWarning, stacklevel=3)
        return
    if bad.buffer.on_chip:
        why = (
            f"{bad.buffer.label}, an on-chip ({bad.buffer.space}) tensor; kernel outputs must "
            "be HBM tensors allocated with buffer=nl.shared_hbm (copy the tile there with "
            "nisa.dma_copy)"
        )
    else:
        why = (
            f"{bad.buffer.label}, a private-HBM (nl.hbm) tensor; GA kernel outputs must be "
            "allocated with buffer=nl.shared_hbm"
        )
    loc = None if isinstance(kernel, str) else return_location(kernel)
    raise ConstraintError(f"kernel {name} returned {why}".replace("kernel  ", "kernel "), loc)


def _bad_output(result: Any) -> NkiTensor | None:
    if isinstance(result, NkiTensor):
        return result if result.buffer.kind in ("private_hbm", "hbm", "sbuf", "psum") else None
    items = result.values() if isinstance(result, dict) else result
    if isinstance(result, (tuple, list, dict)):
        for r in items:
            bad = _bad_output(r)
            if bad is not None:
                return bad
    return None


def return_location(fn: Any) -> SourceLocation | None:
    """The last `return <value>` line of a kernel function's source (its def line if the
    source cannot be read or has none): where an error about its outputs points."""
    fn = inspect.unwrap(getattr(fn, "fn", fn))
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    lineno = code.co_firstlineno
    try:
        lines, start = inspect.getsourcelines(fn)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        tree, start = None, lineno
    func = tree.body[0] if tree is not None and tree.body else None
    if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        returns = [n.lineno for n in _own_nodes(func) if isinstance(n, ast.Return) and n.value]
        if returns:
            lineno = start + max(returns) - 1
    text = linecache.getline(code.co_filename, lineno).strip()
    return SourceLocation(code.co_filename, lineno, code.co_name, text)


def _own_nodes(func: ast.AST) -> list[ast.AST]:
    """The nodes of a function body, not descending into nested functions or classes."""
    out: list[ast.AST] = []
    todo = list(ast.iter_child_nodes(func))
    while todo:
        node = todo.pop()
        out.append(node)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))
    return out
