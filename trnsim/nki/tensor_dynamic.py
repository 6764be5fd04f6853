"""Runtime addressing of NkiTensor views: the methods that create and resolve a DynamicOffset
(nki/dynamic_offset.py): dynamic select, vector_select, .ap(scalar_offset / vector_offset),
.indirect.

A mixin of NkiTensor (trnsim.nki.tensor). Reading or writing a dynamic view gathers or
scatters through the index values current when the instruction executes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from trnsim import dtypes as dt
from trnsim.errors import ConstraintError, OutOfBoundsError
from trnsim.memory import Layout, View, interned, region_of
from trnsim.nki import view_shapes as vs
from trnsim.nki import views as vw
from trnsim.nki.dynamic_offset import (
    DynamicOffset,
    as_dtype,
    axis_shape,
    check_index_tensor,
    user_errors,
)
from trnsim.nki.views import DynSlice, index_value
from trnsim.program import Region
from trnsim.spec import partition_step

if TYPE_CHECKING:
    from trnsim.nki.tensor import NkiTensor

F = TypeVar("F", bound=Callable[..., Any])


class DynamicAccess:
    """NkiTensor's runtime-addressing methods (needs View's buffer/layout and NkiTensor's
    `dynamic`, `_derive` and view checks)."""

    __slots__ = ()
    dynamic: DynamicOffset | None

    def _getitem_dynamic(self, key: list[Any], dyn_dims: list[int]) -> NkiTensor:
        if len(dyn_dims) > 1:
            raise ConstraintError(
                f"{self.buffer.label}: at most one dynamic index per view, "
                f"got tensors on dimensions {dyn_dims}"
            )
        d = dyn_dims[0]
        idx = key[d]
        static = list(key)
        static[d] = slice(None)
        t = (
            self[tuple(static)]
            if any(not (isinstance(k, slice) and k == slice(None)) for k in static)
            else self
        )
        # dims before d may have been dropped by int indices
        d2 = d - sum(1 for k in key[:d] if not isinstance(k, (slice, DynSlice)))
        if idx.size == 1:
            return t.select(d2, idx)
        return t.vector_select(d2, idx)

    def _getitem_register(self, key: list[Any], reg_dims: list[int]) -> NkiTensor:
        """t[reg] / t[nl.ds(reg, n)]: a runtime start on one dim (a scalar dynamic offset)."""
        if len(reg_dims) > 1 or self.dynamic is not None:
            raise ConstraintError(f"{self.buffer.label}: at most one dynamic index per view")
        d = reg_dims[0]
        if d == 0 and self.on_chip:
            raise ConstraintError(
                f"{self.buffer.label}: the partition dimension of an on-chip "
                "tensor cannot take a runtime index"
            )
        k = key[d]
        n = self.shape[d]
        static = list(key)
        if isinstance(k, DynSlice):
            reg = k.start
            step = index_value(k.step)
            static[d] = DynSlice(0, k.size, step)
            bound = n - (index_value(k.size) - 1) * step
        else:
            reg, static[d], bound = k, 0, n
        lay, _ = vw.index_layout(self.layout, tuple(static), self.on_chip, self.buffer.label)
        dyn = DynamicOffset("scalar", reg, self.layout.strides[d], None, bound)
        return self._derive(lay, dyn, "index")

    def _select_dynamic(self, d: int, index: Any) -> NkiTensor:
        if self.dynamic is not None:
            raise ConstraintError(
                f"select of {self.buffer.label}: the view is already indirect; only "
                "one dynamic select per tensor"
            )
        if d == 0 and self.on_chip:
            raise ConstraintError(
                f"select of {self.buffer.label}: a dynamic select cannot index the "
                "partition dimension (0) of an on-chip tensor"
            )
        if isinstance(index, View):
            check_index_tensor(index, "select", scalar=True)
        lay = vw.select_dim(self.layout, d, 0, self.buffer.label)
        dyn = DynamicOffset("scalar", index, self.layout.strides[d], None, self.shape[d])
        return self._derive(lay, dyn, "select")

    @user_errors
    def vector_select(self, dim: int = 0, vector_offset: Any = None) -> NkiTensor:
        """Per-partition row gather: view row w reads row vector_offset[w] of dim 0 (HBM)."""
        d = vw._dim(dim, self.ndim, "vector_select: dimension")
        if d != 0:
            raise ConstraintError(f"vector_select of {self.buffer.label}: dim must be 0, got {d}")
        if self.on_chip:
            raise ConstraintError(
                f"vector_select of {self.buffer.label}: only HBM tensors can be "
                f"indexed by a vector of offsets (tensor is in "
                f"{self.buffer.space})"
            )
        if self.dynamic is not None:
            raise ConstraintError(
                f"vector_select of {self.buffer.label}: the view is already "
                "indirect; only one dynamic select per tensor"
            )
        check_index_tensor(vector_offset, "vector_select", scalar=False)
        n = vector_offset.shape[0]
        lay = Layout(self.dtype, self.offset, (n, *self.shape[1:]), (0, *self.strides[1:]))
        dyn = DynamicOffset("vector", vector_offset, self.strides[0], 0, self.shape[0])
        return self._derive(lay, dyn, "vector_select")

    @user_errors
    def ap(
        self,
        pattern: Any,
        offset: int | None = None,
        scalar_offset: Any = None,
        vector_offset: Any = None,
        indirect_dim: int = 0,
        dtype: Any = None,
    ) -> NkiTensor:
        """Explicit access pattern [[step, count], ...] over the tensor's flattened storage.

        Ignores this view's shape and strides; `offset=None` keeps its offset. On chip the
        first pair is the partition pair and its step must be the storage's elements per
        partition. `dtype` reinterprets the storage (counts, steps, offset in its units).
        """
        new = as_dtype(dtype) if dtype is not None else self.dtype
        ratio = (self.dtype.itemsize, new.itemsize)
        try:
            pairs = [(index_value(p[0]), index_value(p[1])) for p in pattern]
        except (TypeError, IndexError) as e:
            raise ConstraintError(
                f"ap of {self.buffer.label}: pattern {pattern!r} must be a list of "
                "[step, count] pairs"
            ) from e
        if not pairs:
            raise ConstraintError(f"ap of {self.buffer.label}: empty pattern")
        if offset is None:
            off_bytes = self.offset * ratio[0]
            if off_bytes % ratio[1]:
                raise ConstraintError(
                    f"ap of {self.buffer.label}: offset {self.offset} is not a "
                    f"whole number of {new.name} elements"
                )
            off = off_bytes // ratio[1]
        else:
            off = index_value(offset, "ap offset")
        if self.on_chip:
            if self.buffer.nbytes % new.itemsize:
                raise ConstraintError(
                    f"ap of {self.buffer.label}: {self.buffer.nbytes} bytes per "
                    f"partition is not a multiple of {new.itemsize}"
                )
            f = self.buffer.nbytes // new.itemsize
            if pairs[0][1] > 1 and partition_step(pairs[0][0], f) != 1:
                # the dense-partition rule of spec.check_dense_partitions, on the pattern
                raise ConstraintError(
                    f"ap of {self.buffer.label}: the partition step is {pairs[0][0]}; on chip the "
                    f"first [step, count] pair walks partitions and its step must be the "
                    f"storage's {f} elements per partition (dense partitions)"
                )
        shape = tuple(n for _, n in pairs)
        strides = [s for s, _ in pairs]
        dyn = self._ap_dynamic(scalar_offset, vector_offset, indirect_dim, ratio)
        if dyn is not None and dyn.kind == "vector":
            strides[0] = 0
        lay = interned(Layout(new, off, shape, tuple(strides)))
        # Bounds are checked when an instruction uses the pattern (core.NeuronCore.issue), not
        # here: kernels make patterns they use only under a condition (nki-library's
        # output_projection_tkg.py makes the last h_2 tile's pattern, past the weights, and
        # skips its matmul), and a pattern no instruction uses moves no byte.
        return type(self)(self.buffer, lay, dyn)

    def _ap_dynamic(
        self, scalar_offset: Any, vector_offset: Any, indirect_dim: int, ratio: tuple[int, int]
    ) -> DynamicOffset | None:
        if scalar_offset is None and vector_offset is None:
            return None
        if scalar_offset is not None and vector_offset is not None:
            raise ConstraintError(
                f"ap of {self.buffer.label}: scalar_offset and vector_offset are mutually exclusive"
            )
        if self.dynamic is not None:
            raise ConstraintError(f"ap of {self.buffer.label}: the view is already indirect")
        k = vw._dim(indirect_dim, self.ndim, "ap: indirect_dim")
        mult_bytes = self.strides[k] * ratio[0]
        if mult_bytes % ratio[1]:
            raise ConstraintError(
                f"ap of {self.buffer.label}: the stride of dimension {k} is not a "
                "whole number of elements of the new dtype"
            )
        mult = mult_bytes // ratio[1]
        if vector_offset is not None:
            if self.on_chip:
                raise ConstraintError(
                    f"ap of {self.buffer.label}: vector_offset needs an HBM tensor "
                    f"(DMA gather/scatter); tensor is in {self.buffer.space}"
                )
            if k != 0:
                raise ConstraintError(
                    f"ap of {self.buffer.label}: vector_offset works only with "
                    f"indirect_dim=0, got {k}"
                )
            check_index_tensor(vector_offset, "ap vector_offset", scalar=False)
            return DynamicOffset("vector", vector_offset, mult, 0, self.shape[0])
        if isinstance(scalar_offset, View):
            check_index_tensor(scalar_offset, "ap scalar_offset", scalar=True)
        # No per-dimension bound: nki-api.md §4.2 defines only the start address
        # (offset + scalar_offset * the stride of indirect_dim), and a runtime address outside
        # the tensor is the documented error. nki-library's TensorView indexes a size-1
        # dimension that shares the wanted stride (attention_block_tkg_sharding.py:219, a
        # rank's slice through tensor_view.py's stride search), which hardware runs.
        return DynamicOffset("scalar", scalar_offset, mult, None, None)

    @user_errors
    def indirect(self, index: Any, num_elem: int | None = None) -> NkiTensor:
        """Tensor indirection (NC-v4): view (P, num_elem) reading free offsets from `index`."""
        if not self.on_chip:
            raise ConstraintError(
                f"indirect of {self.buffer.label}: tensor indirection works on "
                f"SBUF/PSUM tensors, not {self.buffer.space}"
            )
        if self.dynamic is not None:
            raise ConstraintError(f"indirect of {self.buffer.label}: the view is already indirect")
        if not isinstance(index, View) or not index.buffer.on_chip:
            raise ConstraintError(
                f"indirect of {self.buffer.label}: index must be an SBUF tensor, got "
                f"{type(index).__name__}"
            )
        if index.dtype.kind not in ("int", "uint"):
            raise ConstraintError(
                f"indirect of {self.buffer.label}: index dtype {index.dtype.name}; "
                "offsets must be integers"
            )
        n = index.size if num_elem is None else index_value(num_elem)
        free = self.shape[1:]
        free_strides = self.strides[1:]
        if not vs.dims_mergeable(free, free_strides):
            raise ConstraintError(
                f"indirect of {self.buffer.label}: the free dimensions must be contiguous"
            )
        inner = next(
            (s for k, s in reversed(list(zip(free, free_strides, strict=True))) if k != 1), 1
        )
        lay = Layout(self.dtype, self.offset, (self.shape[0], n), (self.strides[0], 0))
        dyn = DynamicOffset("indirect", index, inner, 1, math.prod(free))
        return self._derive(lay, dyn, "indirect")

    def element_positions(self, group: int = 16) -> tuple[np.ndarray, np.ndarray]:
        """(positions, valid): storage positions of every element (int64, the view's shape)
        and whether its runtime index is in bounds. For static views all are valid."""
        lay = self.layout
        pos = np.full(lay.shape, lay.offset, dtype=np.int64)
        for k, (n, s) in enumerate(zip(lay.shape, lay.strides, strict=True)):
            pos += (np.arange(n, dtype=np.int64) * s).reshape(axis_shape(len(lay.shape), k, n))
        valid = np.ones(lay.shape, dtype=bool)
        dyn = self.dynamic
        if dyn is None:
            return pos, valid
        offs = dyn.offsets(group)
        ok = (offs >= 0) & (offs < dyn.bound) if dyn.bound is not None else np.ones_like(offs, bool)
        if dyn.kind == "scalar":
            pos += offs[0] * dyn.multiplier
            valid &= bool(ok[0])
            return pos, valid
        d = dyn.dim
        n = lay.shape[d]
        if offs.size < n:
            raise OutOfBoundsError(
                f"{self.buffer.label}: {dyn.kind} offset tensor has "
                f"{offs.size} values, the view needs {n}"
            )
        shape = axis_shape(len(lay.shape), d, n)
        pos += (offs[:n] * dyn.multiplier).reshape(shape)
        valid &= ok[:n].reshape(shape)
        return pos, valid

    def _typed_storage(self) -> np.ndarray:
        raw = self.buffer.raw()
        return raw.view(self.dtype.storage)

    def _locate(self, group: int = 16) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
        pos, valid = self.element_positions(group)
        typed = self._typed_storage()
        total = typed.size
        in_range = (pos >= 0) & (pos < total)
        if not np.all(valid & in_range):
            bad = np.argwhere(~(valid & in_range))[0]
            dyn = self.dynamic
            raise OutOfBoundsError(
                f"{self.buffer.label}: runtime index out of bounds at element {tuple(bad)}: "
                f"the {dyn.kind if dyn else 'static'} offset reaches outside the "
                f"{self.buffer.space} tensor"
                + (f" (valid indices [0, {dyn.bound}))" if dyn is not None and dyn.bound else "")
            )
        if self.on_chip:
            f = typed.shape[1]
            return tuple(np.divmod(pos, f)), valid
        return (pos,), valid

    def array(self) -> np.ndarray:
        if self.dynamic is None:
            return super().array()
        idx, _ = self._locate()
        return self._typed_storage()[idx]

    def write(self, values: Any) -> None:
        if self.dynamic is None:
            super().write(values)
            return
        vals = np.asarray(values)
        if vals.dtype != self.dtype.storage:
            vals = dt.cast(vals, self.dtype)
        self.write_raw(np.broadcast_to(vals, self.shape))

    def write_raw(self, values: np.ndarray) -> None:
        if self.dynamic is None:
            super().write_raw(values)
            return
        idx, _ = self._locate()
        self._typed_storage()[idx] = np.broadcast_to(values, self.shape)

    def region(self) -> Region:
        if self.dynamic is None:
            return region_of(self.buffer, self.layout)  # View.region, without super()'s cost
        # Any element of the buffer may be touched: the whole buffer is the dependency unit.
        b = self.buffer
        core = -1 if b.core is None else b.core
        return Region(
            b.space, core, b.partition_start, b.partitions, b.byte_start, b.byte_start + b.nbytes
        )
