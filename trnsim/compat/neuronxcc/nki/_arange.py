"""nl.arange and nl.mgrid: the constructors of Beta-1 index expressions (see _index)."""

from __future__ import annotations

from typing import Any

from trnsim.compat.neuronxcc.nki._index import IndexExpr, as_int
from trnsim.errors import ConstraintError


def arange(*args: int) -> IndexExpr:
    """nl.arange([start,] stop[, step]): a 1-D index; place it with [:, None] / [None, :]."""
    if not 1 <= len(args) <= 3:
        raise ConstraintError(f"nl.arange takes 1 to 3 integers (start, stop, step), got {args}")
    r = range(*(as_int(a, "nl.arange") for a in args))
    return IndexExpr((len(r),), (r.step,), r.start)


class MGridResult(tuple):
    """The index expressions of nl.mgrid[...]: unpack them, or use .p (partition), .x, .y, .z."""

    __slots__ = ()

    def _axis(self, k: int, name: str) -> IndexExpr:
        if k >= len(self):
            raise AttributeError(f"nl.mgrid of rank {len(self)} has no attribute .{name}")
        return self[k]

    @property
    def p(self) -> IndexExpr:
        return self._axis(0, "p")

    @property
    def x(self) -> IndexExpr:
        return self._axis(1, "x")

    @property
    def y(self) -> IndexExpr:
        return self._axis(2, "y")

    @property
    def z(self) -> IndexExpr:
        return self._axis(3, "z")


class _MGrid:
    """nl.mgrid[0:P, 0:F, ...]: dense index grids, one IndexExpr per axis."""

    def __getitem__(self, key: Any) -> MGridResult:
        key = key if isinstance(key, tuple) else (key,)
        ranges = []
        for k in key:
            if not isinstance(k, slice) or k.stop is None:
                raise ConstraintError(
                    f"nl.mgrid takes slices with a stop, e.g. nl.mgrid[0:128, 0:512], got {k!r}"
                )
            ranges.append(
                range(
                    as_int(k.start or 0, "nl.mgrid"),
                    as_int(k.stop, "nl.mgrid"),
                    as_int(k.step or 1, "nl.mgrid"),
                )
            )
        shape = tuple(len(r) for r in ranges)
        return MGridResult(
            IndexExpr(shape, tuple(r.step if j == k else 0 for j in range(len(ranges))), r.start)
            for k, r in enumerate(ranges)
        )

    def __repr__(self) -> str:
        return "nl.mgrid"


mgrid = _MGrid()
