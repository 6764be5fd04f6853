"""Beta-1 nl.all_reduce: a reduction of one tile across the programs of an SPMD launch.

A kernel that calls nl.all_reduce runs its grid programs cooperatively (trnsim.nki.lnc: one
thread per program, one baton, deterministic switch points). Each program copies its tile into
the result (recorded as one dma_copy per program: the collective's data movement), posts the
values and waits until every program of its group (same coordinates on the axes not in
`program_axes`) has posted; the result is then the fp32 reduction over the group in program
order, cast to the result dtype. The combine step is computed at the rendezvous, not issued as
instructions, so the timing model sees only the copies.
"""

from __future__ import annotations

import types
from typing import Any

import numpy as np

from trnsim import dtypes as dt
from trnsim.compat.neuronxcc.nki import _math as M
from trnsim.compat.neuronxcc.nki._emit import run
from trnsim.compat.neuronxcc.nki._index import as_mask
from trnsim.compat.neuronxcc.nki._state import api, context, here
from trnsim.compat.neuronxcc.nki._tensor import tensor
from trnsim.errors import ConstraintError, UnsupportedError
from trnsim.nki.runner import grid_points
from trnsim.semantics._ops import apply_binary, op_name


def uses_all_reduce(fn: Any) -> bool:
    """True if fn's code (or a nested function's) refers to a name `all_reduce`."""
    code = getattr(fn, "__code__", None)
    stack = [code] if code is not None else []
    while stack:
        c = stack.pop()
        if "all_reduce" in c.co_names:
            return True
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return False


@api("nl.all_reduce")
def all_reduce(
    x: Any,
    op: Any,
    program_axes: Any,
    *,
    dtype: Any = None,
    mask: Any = None,
    parallel_reduce: bool = True,
    asynchronous: bool = False,
    **kwargs: Any,
) -> tensor:
    """op-reduce x across the programs along the grid axes `program_axes`."""
    ctx, _ = context("nl.all_reduce")
    x = M.tile(x, "nl.all_reduce", "x")
    name = op_name(op, "op")
    loc, loops = here()
    out = M.fresh(tuple(x.shape), M.out_dtype(dtype, x.dtype), name="all_reduce")
    run(
        "dma_copy",
        None,
        domain=tuple(x.shape),
        outputs={"dst": (out, None)},
        inputs={"src": x if x.space == "sbuf" else M.to_sbuf(x)},
        mask=as_mask(mask),
        loc=loc,
        loops=loops,
    )
    grid = tuple(ctx.grid)
    axes = (
        (program_axes,)
        if isinstance(program_axes, (int, np.integer))
        else tuple(int(a) for a in program_axes)
    )
    if any(not 0 <= a < max(len(grid), 1) for a in axes):
        raise ConstraintError(
            f"nl.all_reduce: program_axes {axes} outside the launch grid of rank {len(grid)}"
        )
    programs = ctx.extra.get("lnc")
    group_size = int(np.prod([grid[a] for a in axes])) if grid else 1
    if group_size == 1:
        return out
    if programs is None:
        raise UnsupportedError(
            "nl.all_reduce: this launch runs its programs one after "
            "another; call nl.all_reduce inside the kernel function itself "
            "so trnsim runs the grid cooperatively",
            loc,
        )
    pid = tuple(ctx.program_id)
    rank = grid_points(grid).index(pid)
    key = tuple(p for k, p in enumerate(pid) if k not in axes)
    calls = programs.state.setdefault("b1_all_reduce_calls", {})
    seq = calls.get(rank, 0)
    calls[rank] = seq + 1
    posted = programs.state.setdefault("b1_all_reduce", {}).setdefault((seq, key), {})
    posted[rank] = out.operand().read_f32() if ctx.device.values else None
    programs.wait_until(rank, lambda: len(posted) == group_size, f"nl.all_reduce #{seq}", loc)
    if ctx.device.values:
        acc = None
        for r in sorted(posted):
            v = posted[r]
            acc = v if acc is None else apply_binary(name, acc, v)
        out.operand().write(dt.cast(np.asarray(acc, dtype=np.float32), out.dtype))
    return out
