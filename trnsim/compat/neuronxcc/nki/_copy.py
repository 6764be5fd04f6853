"""Beta-1 data movement between any two places: assignment `t[...] = value`, and the moves
behind nl.load / nl.store / nl.copy / nl.broadcast_to.

HBM <-> SBUF moves are dma_copy; on-chip copies are tensor_copy (Vector engine). What the
hardware cannot do in one step goes through a fresh SBUF tile, as the B1 compiler does: DMA
never touches PSUM (a PSUM value is copied to SBUF before a store), and a partition broadcast
((1, F) -> (P, F)) is a DMA from a stride-0 partition view. A smaller value broadcasts into a
larger destination (NumPy rules); a larger one is err_store_dst_shape_smaller_than_other_shape.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from trnsim.compat.neuronxcc.nki._emit import run
from trnsim.compat.neuronxcc.nki._errors import b1_error
from trnsim.compat.neuronxcc.nki._index import IndexExpr, broadcast_shapes
from trnsim.compat.neuronxcc.nki._indirect import IndirectAccess
from trnsim.compat.neuronxcc.nki._state import here
from trnsim.compat.neuronxcc.nki._tensor import tensor
from trnsim.errors import ConstraintError, KernelError

SCALARS = (int, float, bool, np.integer, np.floating, np.bool_)


def _elems(shape: tuple[int, ...]) -> int:
    return int(math.prod(shape))


def fit(dst: Any, value: tensor, what: str) -> tensor:
    """value as seen from dst: the same access, or a stride-0 broadcast of it."""
    ds, vs = tuple(dst.shape), tuple(value.shape)
    if ds == vs:
        return value
    if ds and vs and ds[0] == vs[0] and _elems(ds) == _elems(vs) and len(ds) != len(vs):
        return value  # same partitions and elements: a different free-dim factorization
    try:
        ok = broadcast_shapes(ds, vs, what=what) == ds
    except KernelError:
        ok = False
    if not ok:
        raise b1_error(
            ConstraintError,
            "err_store_dst_shape_smaller_than_other_shape",
            f"Illegal assignment destination shape in '{what}': shape "
            f"{list(ds)} of `{getattr(dst, 'name', '') or '?'}` is smaller than "
            f"(or incompatible with) the value shape {list(vs)}",
        )
    return value.broadcast_view(ds)


def _tmp_sbuf(shape: tuple[int, ...], dtype: Any) -> tensor:
    from trnsim.compat.neuronxcc.nki import _create

    return _create.allocate(shape, dtype, "sbuf", "tmp")


def move(
    dst: Any, src: Any, *, mask: Any = None, loc: Any = None, loops: tuple = (), what: str = "copy"
) -> None:
    """dst = src for two accesses of the same shape (src may be a broadcast view)."""
    dom = tuple(dst.shape)
    pbcast = (
        isinstance(src, tensor)
        and src.on_chip
        and src.partition_axis() is None
        and dom
        and dom[0] > 1
    )

    def step(opcode: str, d: Any, s: Any) -> None:
        run(
            opcode,
            None,
            domain=dom,
            outputs={"dst": (d, None)},
            inputs={"src": s},
            mask=mask,
            loc=loc,
            loops=loops,
        )

    dspace, sspace = dst.space, src.space
    if dspace == "hbm":
        if sspace == "psum":
            tmp = _tmp_sbuf(dom, src.dtype)
            step("tensor_copy", tmp, src)
            src = tmp
        step("dma_copy", dst, src)
    elif sspace == "hbm":
        if dspace == "psum":
            tmp = _tmp_sbuf(dom, src.dtype)
            step("dma_copy", tmp, src)
            step("tensor_copy", dst, tmp)
        else:
            step("dma_copy", dst, src)
    elif pbcast:
        if sspace == "psum":  # DMA cannot read PSUM: copy the (1, F) row to SBUF first
            row = _tmp_sbuf((1, *dom[1:]), src.dtype)
            run(
                "tensor_copy",
                None,
                domain=(1, *dom[1:]),
                outputs={"dst": (row, None)},
                inputs={"src": src[0:1]},
                loc=loc,
                loops=loops,
            )
            src = row.broadcast_view(dom)
        if dspace == "psum":
            tmp = _tmp_sbuf(dom, dst.dtype)
            step("dma_copy", tmp, src)
            step("tensor_copy", dst, tmp)
        else:
            step("dma_copy", dst, src)
    else:
        step("tensor_copy", dst, src)


def copy_into(dst: tensor, value: Any, *, mask: Any = None, what: str = "assignment") -> None:
    """`dst[...] = value` for a tensor, scalar or index expression value."""
    loc, loops = here()
    if isinstance(value, IndexExpr):
        raise ConstraintError(
            f"{what}: an index expression has no storage; materialize it "
            "with nisa.iota(expr, dtype)"
        )
    if isinstance(value, SCALARS):
        if not dst.on_chip:
            raise ConstraintError(
                f"{what}: a scalar can only be written to an SBUF/PSUM tile "
                f"(`{dst.name}` is in {dst.space}); store a tile instead"
            )
        run(
            "memset",
            None,
            domain=tuple(dst.shape),
            outputs={"dst": (dst, None)},
            inputs={"value": value},
            mask=mask,
            loc=loc,
            loops=loops,
        )
        return
    if isinstance(value, IndirectAccess):
        load_indirect(dst, value, mask=mask)
        return
    if not isinstance(value, tensor):
        raise ConstraintError(
            f"{what}: cannot assign a {type(value).__name__} to tensor "
            f"`{dst.name}` (expected a tile, tensor or scalar)"
        )
    value._ready()
    if dst.on_chip:
        dst.as_tile(what, "dst")
    move(dst, fit(dst, value, what), mask=mask, loc=loc, loops=loops, what=what)


def load_indirect(dst: tensor, src: IndirectAccess, *, mask: Any = None) -> None:
    """dst (SBUF) = rows of src picked by its index tile (a DMA gather)."""
    loc, loops = here()
    if tuple(dst.shape) != tuple(src.shape):
        raise b1_error(
            ConstraintError,
            "err_store_dst_shape_smaller_than_other_shape",
            f"indirect load: destination {list(dst.shape)} and source "
            f"{list(src.shape)} shapes differ",
        )
    target = dst if dst.space == "sbuf" else _tmp_sbuf(tuple(dst.shape), src.dtype)
    run(
        "dma_copy",
        None,
        domain=tuple(dst.shape),
        outputs={"dst": (target, None)},
        inputs={"src": src},
        mask=mask,
        loc=loc,
        loops=loops,
    )
    if target is not dst:
        move(dst, target, mask=mask, loc=loc, loops=loops)


def store_indirect(
    dst: IndirectAccess, value: Any, *, mask: Any = None, rmw_op: str | None = None
) -> None:
    """Rows of value scattered to the HBM rows picked by dst's index tile (optionally +=)."""
    loc, loops = here()
    if not isinstance(value, tensor):
        raise ConstraintError("indirect store: the value must be a tile")
    value._ready()
    src = fit(dst, value, "indirect store")
    if src.space == "psum" or (src.on_chip and src.partition_axis() is None and dst.shape[0] > 1):
        tmp = _tmp_sbuf(tuple(dst.shape), value.dtype)
        move(tmp, src, mask=mask, loc=loc, loops=loops)
        src = tmp
    attrs = {"dst_rmw_op": rmw_op} if rmw_op else {}
    run(
        "dma_copy",
        None,
        domain=tuple(dst.shape),
        outputs={"dst": (dst, None)},
        inputs={"src": src},
        attrs=attrs,
        mask=mask,
        loc=loc,
        loops=loops,
    )


def store_dynamic(dst: Any, value: Any) -> None:
    """dst (on chip, at a runtime offset) = value: tensor_copy_dynamic_dst."""
    loc, loops = here()
    if not isinstance(value, tensor):
        raise ConstraintError("assignment at a runtime offset: the value must be a tile")
    value._ready()
    run(
        "tensor_copy_dynamic_dst",
        None,
        domain=tuple(dst.shape),
        outputs={"dst": (dst, None)},
        inputs={"src": fit(dst, value, "dynamic assignment")},
        loc=loc,
        loops=loops,
    )
