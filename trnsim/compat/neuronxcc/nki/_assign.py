"""Beta-1 assignment: `t[key] = value` and `t += value` (and -=, *=, /=).

A pending result (see _emit) is emitted straight into the destination when its instruction can
write there (PSUM `+=` becomes an accumulating matmul); otherwise the value is materialized and
copied, a masked call copying only what its mask computed. Knows nothing about values.
"""

from __future__ import annotations

import math
from typing import Any

from trnsim.compat.neuronxcc.nki._emit import Pending, _alias, _narrow, take_pending
from trnsim.compat.neuronxcc.nki._errors import b1_error
from trnsim.compat.neuronxcc.nki._indirect import DynamicAccess, IndirectAccess
from trnsim.compat.neuronxcc.nki._state import context, here
from trnsim.compat.neuronxcc.nki._tensor import tensor
from trnsim.errors import ConstraintError, KernelError


def assign_item(t: tensor, key: Any, value: Any) -> None:
    """`t[key] = value` (and the store half of `t[key] += value`)."""
    from trnsim.compat.neuronxcc.nki import _copy

    _, st = context("tensor assignment")
    try:
        dst = t[key]
        if isinstance(value, tensor) and value._inplace:
            value._inplace = False
            if isinstance(dst, tensor) and value.same_access(dst):
                return  # already updated in place by +=, -=, *=, /=
        pending = value._pending if isinstance(value, tensor) else None
        if pending is None:
            st.flush()
        if isinstance(dst, IndirectAccess):  # an indirect HBM access: a scatter store
            _copy.store_indirect(dst, value)
            return
        if isinstance(dst, DynamicAccess):  # an on-chip destination at a runtime offset
            _copy.store_dynamic(dst, value)
            return
        if pending is not None and emit_into(dst, value, "write"):
            return
        if pending is not None and pending.mask is not None:
            _copy_masked_result(dst, value, pending)
            return
        _copy.copy_into(dst, value)
    except KernelError as e:
        raise e.with_loc(here()[0]) from None


def _copy_masked_result(dst: tensor, value: tensor, p: Pending) -> None:
    """`dst[...] = masked_call(...)` where the call cannot write dst (TensorE into SBUF): run it
    into a fresh tile, then copy only what the mask computed, so masked-out destination
    elements stay untouched (a false mask issues nothing at all)."""
    from trnsim.compat.neuronxcc.nki import _copy

    if p.mask is False:
        take_pending(value)
        return
    value._ready()
    domain = tuple(p.domain or p.shape)
    box, residual = p.mask.box(domain)
    if any(hi <= lo for lo, hi in box):
        return
    if residual or tuple(dst.shape) != tuple(value.shape):
        _copy.copy_into(dst, value, mask=p.mask if tuple(dst.shape) == domain else None)
        return
    region = tuple(slice(lo, hi) for lo, hi in _narrow(box, p.out_axes, value, domain))
    _copy.copy_into(dst[region], value[region])


def emit_into(dst: tensor, value: tensor, mode: str) -> bool:
    """Emit a pending value straight into dst when its instruction can write there."""
    p = value._pending
    if p is None or (not dst.on_chip and "hbm" not in p.dst_spaces):
        return False
    if dst.space not in p.dst_spaces:
        return False
    if p.dst_dtype is not None and dst.dtype != p.dst_dtype:
        return False  # materialized in its own dtype, then cast into dst
    if tuple(dst.shape) != tuple(p.shape) and (
        not dst.shape
        or not p.shape
        or dst.shape[0] != p.shape[0]
        or math.prod(dst.shape) != math.prod(p.shape)
    ):
        return False
    take_pending(value)
    p.emit(dst, mode)
    _alias(value, dst)
    return True


def accumulate(t: tensor, value: Any, op: str) -> tensor:
    """`t += value` (and -=, *=, /=): an in-place read-modify-write of t."""
    from trnsim.compat.neuronxcc.nki import _math

    _, st = context(f"tensor {op}=")
    loc = here()[0]
    try:
        t._ready()
        if isinstance(value, tensor) and value._pending is not None:
            p = value._pending
            if (
                op == "add"
                and p.accumulates
                and t.space == "psum"
                and tuple(t.shape) == tuple(p.shape)
            ):
                take_pending(value)
                p.emit(t, "accumulate")
                t._inplace = True
                return t
        st.flush()
        if not t.on_chip:
            raise b1_error(
                ConstraintError,
                "err_unsupported_memory",
                f"in-place '{op}' on HBM tensor `{t.name}`: only SBUF and PSUM "
                "tiles can be updated in place",
            )
        result = _math.binary(op, t, value, dst_dtype=t.dtype, operator_form=True)
        emit_into(t, result, "accumulate") or _fallback_accumulate(t, result)
    except KernelError as e:
        raise e.with_loc(loc) from None
    t._inplace = True
    return t


def _fallback_accumulate(t: tensor, result: tensor) -> None:
    from trnsim.compat.neuronxcc.nki import _copy

    _copy.copy_into(t, result._ready())
