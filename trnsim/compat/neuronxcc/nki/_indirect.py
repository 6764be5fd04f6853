"""Beta-1 indirect HBM access: `data[idx_tile[i_p, 0], i_f]` in nl.load / nl.store /
nl.atomic_rmw / nisa.dma_copy.

An SBUF tile of indices replaces the first (partition or block) index of an HBM tensor; view row
w then reads base row idx[w]. It becomes the DMA helper's vector-offset view (trnsim.nki.tensor
DynamicOffset kind "vector", the same mechanism as GA `.ap(vector_offset=)`), so dma_copy
gathers and scatters the rows when it executes, and out-of-range indices raise at run time
(or are skipped with oob_mode=skip).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trnsim.compat.neuronxcc.nki._errors import b1_error
from trnsim.compat.neuronxcc.nki._index import IndexExpr
from trnsim.compat.neuronxcc.nki._tensor import Box, full_box, tensor
from trnsim.errors import ConstraintError
from trnsim.memory import Layout
from trnsim.nki.tensor import DynamicOffset, NkiTensor


class IndirectAccess:
    """An HBM tensor indexed on its first dimension by an SBUF tile of row indices."""

    on_chip = False
    space = "hbm"

    def __init__(self, base: tensor, key: tuple[Any, ...]):
        positions = [k for k, e in enumerate(key) if isinstance(e, tensor)]
        lead = positions[0] if len(positions) == 1 else 0
        if lead and all(isinstance(e, (int, np.integer)) and not isinstance(e, bool)
                        for e in key[:lead]):
            # integer indices in front select a sub-tensor whose first dimension is the
            # indirect one: `data[b, idx_tile, i_f]` (AWS's resize_nearest kernel) is
            # `data[b][idx_tile, i_f]`
            base, key = base[tuple(key[:lead])], tuple(key[lead:])
            positions = [0]
        if len(positions) != 1 or positions[0] != 0:
            raise b1_error(
                ConstraintError,
                "err_indirect_indices_free_dim",
                f"tensor `{base.name or '?'}`: indirect indexing on free dimension "
                "not supported, must be partition dimension or block dimension "
                "(the first index)",
            )
        if base.on_chip:
            raise b1_error(
                ConstraintError,
                "err_copy_dynamic_indirect_indices_not_natively_supported",
                f"tensor `{base.name or '?'}` is on chip: indirect "
                "indexing reads HBM (on-chip dynamic offsets go through "
                "nisa.tensor_copy_dynamic_src/dst)",
            )
        index = key[0]._ready()
        if index.space != "sbuf":
            raise b1_error(
                ConstraintError,
                "err_indirect_indices_sbuf",
                f"indirect indices tile must be on SBUF, got {index.space}",
            )
        if any(
            isinstance(e, IndexExpr) and e.shape and e.shape[0] > 1 and e.coefs[0] for e in key[1:]
        ):
            raise b1_error(
                ConstraintError,
                "err_indirect_indices_free_dim",
                "the free indices of an indirect access cannot vary along the partition axis",
            )
        parts = index.shape[0]
        if index.ndim < 1 or int(_prod(index.shape[1:])) != 1:
            raise ConstraintError(
                f"indirect index tile must have shape (P, 1), got {list(index.shape)}"
            )
        static = base[(0, *key[1:])]
        if static.ndim >= 2 and static.shape[0] in (1, parts):
            # the free indices' own partition extent (an mgrid/arange grid) is the index
            # tile's: `data[idx_tile, iy]` with iy from nl.mgrid[0:P, 0:F] is (P, F)
            static = static.broadcast_view((parts, *static.shape[1:]))
        else:
            static = static.with_axis(0).broadcast_view((parts, *static.shape))
        self.base = base
        self.index = index
        self.static = static
        self.shape = static.shape
        self.dtype = base.dtype
        self.name = base.name

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def _ready(self) -> IndirectAccess:
        return self

    def operand(self, box: Box | None = None) -> NkiTensor:
        """The dma_copy operand: row w of the box reads base row index[w]."""
        box = box or full_box(self.shape)
        static = self.static
        static.check_bounds([(0, 1), *box[1:]])
        lay = static.layout(box)
        lay = Layout(lay.dtype, lay.offset, lay.shape, (0, *lay.strides[1:]))
        (p0, p1) = box[0]
        idx = self.index[p0:p1]
        dyn = DynamicOffset(
            "vector", idx.operand(), self.base.layout().strides[0], 0, self.base.shape[0]
        )
        return NkiTensor(static._buf, lay, dyn)


def _prod(xs: tuple[int, ...]) -> int:
    out = 1
    for x in xs:
        out *= x
    return out


class DynIndex:
    """`offset_tile + expr`: an index whose start is a runtime value (a 1x1 SBUF tile)."""

    def __init__(self, tile: tensor, expr: Any):
        self.tile = tile
        self.expr = expr

    def __add__(self, other: Any) -> DynIndex:
        return DynIndex(self.tile, self.expr + other)

    __radd__ = __add__


class DynamicAccess:
    """An on-chip tensor whose index on one free dimension starts at a runtime offset (a 1x1
    SBUF tile): `t[i_p, off + i_f]` or `t[:, nl.ds(off, n)]` for
    nisa.tensor_copy_dynamic_src / _dst. It becomes a GA scalar DynamicOffset view."""

    on_chip = True

    def __init__(self, base: tensor, key: tuple[Any, ...]):
        from trnsim.nki.views import DynSlice

        dyn = [
            k
            for k, e in enumerate(key)
            if isinstance(e, DynIndex) or (isinstance(e, DynSlice) and isinstance(e.start, tensor))
        ]
        if len(dyn) != 1 or dyn[0] == 0:
            raise b1_error(
                ConstraintError,
                "err_copy_dynamic_indirect_indices_not_natively_supported",
                f"tensor `{base.name or '?'}`: one free dimension can take a runtime "
                "offset (a 1x1 SBUF tile); the partition index must be static",
            )
        k = dyn[0]
        entry = key[k]
        if isinstance(entry, DynIndex):
            offset, static_entry = entry.tile, entry.expr
        else:
            offset, static_entry = entry.start, slice(0, int(entry.size), int(entry.step))
        offset = offset._ready()
        if offset.space != "sbuf" or offset.layout().size != 1:
            raise b1_error(
                ConstraintError,
                "err_indirect_indices_sbuf",
                "the runtime offset must be a 1x1 tile in SBUF",
            )
        self.base = base
        self.offset = offset
        self.static = base[(*key[:k], static_entry, *key[k + 1 :])]
        self.multiplier = base.layout().strides[k]
        self.bound = base.shape[k]
        self.shape = self.static.shape
        self.dtype = base.dtype
        self.name = base.name
        self.space = base.space

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def _ready(self) -> DynamicAccess:
        return self

    def operand(self, box: Box | None = None) -> NkiTensor:
        view = self.static.operand(box)
        dyn = DynamicOffset("scalar", self.offset.operand(), self.multiplier, None, self.bound)
        return NkiTensor(view.buffer, view.layout, dyn)
