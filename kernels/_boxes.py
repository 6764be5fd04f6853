"""Multi-axis column groups of strided HBM views, cut into boxes: the free-axis side of the
reduction, scan and gather device kernels (rows on partitions come from `_rows.RowSpace`).

Layer: kernel library (trnsim.kernels). Knows shapes, strides and access patterns; nothing
about the math of the kernels that use it.

A `Group` is a set of logical axes traversed in lockstep by several HBM operands (x and out,
or x and index): each axis with its size and its element stride in every operand, size-1 axes
dropped and axes contiguous in every operand merged (a contiguous tensor's reduced axes are one
axis whatever their number). `Group.boxes(cap)` cuts the axes into rectangular boxes of at most
`cap` elements: the innermost axes whole while they fit, the next axis in chunks, the outer
axes one index at a time, so each box is one [step, count] pattern per operand (one DMA) and
a run of consecutive flat indices of the group.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Box:
    """A box of a group: its first flat index, element count, and per operand the element
    offset of its first element and its [step, count] pairs (outermost first)."""

    start: int
    size: int
    offsets: tuple[int, ...]
    patterns: tuple[tuple[tuple[int, int], ...], ...]

    def pattern(self, i: int) -> list[list[int]]:
        return [list(p) for p in self.patterns[i]]


class Group:
    """Axes of several operands traversed in lockstep (see the module docstring)."""

    def __init__(self, sizes: tuple[int, ...], strides: list[tuple[int, ...]]):
        """sizes: the logical axes' sizes; strides[i]: operand i's element stride per axis."""
        dims: list[tuple[int, list[int]]] = []
        for k, n in enumerate(sizes):
            if n == 1:
                continue
            ss = [s[k] for s in strides]
            if dims and all(po == si * n for po, si in zip(dims[-1][1], ss, strict=True)):
                dims[-1] = (dims[-1][0] * n, ss)
            else:
                dims.append((n, ss))
        self.sizes = tuple(n for n, _ in dims)
        self.strides = [tuple(ss[i] for _, ss in dims) for i in range(len(strides))]
        self.n_operands = len(strides)
        self.size = math.prod(self.sizes)

    @classmethod
    def of(cls, views: list, axes: list[int]) -> Group:
        """Axes `axes` (logical axis numbers, in order) of `views`, which agree on their sizes."""
        sizes = tuple(int(views[0].shape[a]) for a in axes)
        return cls(sizes, [tuple(int(v.strides[a]) for a in axes) for v in views])

    def boxes(self, cap: int) -> list[Box]:
        """The group cut into boxes of at most `cap` elements, in flat (row-major) order."""
        sizes, k, inner = self.sizes, len(self.sizes), 1
        while k > 0 and inner * sizes[k - 1] <= cap:
            k -= 1
            inner *= sizes[k]
        if k == 0:
            return [self._box((0,) * len(sizes), sizes)]
        chunk = max(1, cap // inner)
        out = []
        for idx in _indices(sizes[: k - 1]):
            for c0 in range(0, sizes[k - 1], chunk):
                c = min(chunk, sizes[k - 1] - c0)
                out.append(
                    self._box(
                        (*idx, c0, *([0] * (len(sizes) - k))), (*([1] * len(idx)), c, *sizes[k:])
                    )
                )
        return out

    def _box(self, start: tuple[int, ...], count: tuple[int, ...]) -> Box:
        flat = 0
        for s, n in zip(start, self.sizes, strict=True):
            flat = flat * n + s
        offs, pats = [], []
        for st in self.strides:
            offs.append(sum(i * s for i, s in zip(start, st, strict=True)))
            pats.append(tuple((s, n) for s, n in zip(st, count, strict=True) if n > 1))
        return Box(flat, math.prod(count), tuple(offs), tuple(pats))


def _indices(sizes: tuple[int, ...]):
    """All index tuples of `sizes`, row-major."""
    for flat in range(math.prod(sizes)):
        idx = []
        for s in reversed(sizes):
            flat, i = divmod(flat, s)
            idx.append(i)
        yield tuple(reversed(idx))


def hbm(view, pattern: list[list[int]], offset: int, box: Box | None = None, i: int = 0):
    """`view`'s storage through a row pattern (from a RowSpace block: its element offset and
    [step, count] pairs) followed by column box `box` of operand i (when given)."""
    pat = [list(p) for p in pattern]
    if box is not None:
        pat += box.pattern(i)
        offset += box.offsets[i]
    return view.ap(pat or [[1, 1]], offset=offset)
