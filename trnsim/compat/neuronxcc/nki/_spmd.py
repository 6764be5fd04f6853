"""Beta-1 SPMD launch grids: nl.program_id, nl.num_programs, nl.program_ndim, nl.nc,
nl.spmd_dim.

`kernel[d0, d1, ...]` runs one program per grid point (trnsim.nki.runner.run_kernel with
generation="beta1"); a dimension given as `nl.nc(n)` (or `nl.spmd_dim(nl.nc(2), 4)`, the same
as `nl.nc(2) * 4`) is spread over n physical NeuronCores. Program ids are plain ints, so they
enter masks and index expressions like loop variables.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trnsim.compat.neuronxcc.nki._errors import b1_error
from trnsim.compat.neuronxcc.nki._state import context
from trnsim.errors import ConstraintError


class SpmdDim:
    """A launch-grid dimension of `size` programs spread over `cores` NeuronCores."""

    __slots__ = ("cores", "size")

    def __init__(self, size: int, cores: int = 1):
        self.size = int(size)
        self.cores = int(cores)

    def __int__(self) -> int:
        return self.size

    __index__ = __int__

    def __mul__(self, k: Any) -> SpmdDim:
        if isinstance(k, SpmdDim):
            return SpmdDim(self.size * k.size, self.cores * k.cores)
        return SpmdDim(self.size * int(k), self.cores)

    __rmul__ = __mul__

    def __repr__(self) -> str:
        return f"spmd_dim(size={self.size}, cores={self.cores})"


def nc(n: int) -> SpmdDim:
    """A grid dimension of n programs, one per physical NeuronCore."""
    return SpmdDim(int(n), int(n))


def spmd_dim(*dims: Any) -> SpmdDim:
    """One grid dimension made of sub-dimensions (nl.spmd_dim(nl.nc(2), 2) == nl.nc(2) * 2)."""
    out = SpmdDim(1, 1)
    for d in dims:
        out = out * d
    return out


def grid_of(key: Any) -> tuple[tuple[int, ...], int]:
    """(grid sizes, NeuronCores) of a `kernel[...]` subscript."""
    dims = key if isinstance(key, tuple) else (key,)
    sizes, cores = [], 1
    for d in dims:
        if isinstance(d, SpmdDim):
            sizes.append(d.size)
            cores *= d.cores
        elif isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 1:
            sizes.append(int(d))
        else:
            raise ConstraintError(
                f"kernel[{', '.join(map(repr, dims))}]: grid dimensions must "
                f"be positive ints or nl.nc(n) / nl.spmd_dim(...), got {d!r}"
            )
    return tuple(sizes), cores


def program_id(axis: int = 0) -> int:
    """This program's coordinate along grid axis `axis` (0 without a grid)."""
    ctx, _ = context("nl.program_id")
    axis = int(axis)
    if not ctx.grid and axis == 0:
        return 0
    if not 0 <= axis < max(len(ctx.grid), 1):
        raise b1_error(
            ConstraintError,
            "err_program_id_axis_out_of_bounds",
            f"axis in `program_id` is out-of-bound(s) of the spmd launch grid "
            f"(axis={axis}, grid rank {len(ctx.grid)})",
        )
    return ctx.program_id[axis] if ctx.program_id else 0


def num_programs(axes: Any = None) -> int:
    """Programs along `axes` (an int or a tuple; None: all of them)."""
    ctx, _ = context("nl.num_programs")
    grid = ctx.grid or (1,)
    if axes is None:
        return int(np.prod(grid))
    axes = (axes,) if isinstance(axes, (int, np.integer)) else tuple(axes)
    n = 1
    for a in axes:
        if not 0 <= int(a) < len(grid):
            raise b1_error(
                ConstraintError,
                "err_program_id_axis_out_of_bounds",
                f"nl.num_programs: axis {a} is out of the launch grid of rank {len(grid)}",
            )
        n *= grid[int(a)]
    return n


def program_ndim() -> int:
    """Rank of the launch grid (0 without one)."""
    ctx, _ = context("nl.program_ndim")
    return len(ctx.grid)
