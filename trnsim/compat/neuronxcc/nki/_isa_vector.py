"""Beta-1 nisa Vector-engine arithmetic: tensor_tensor, tensor_scalar, scalar_tensor_tensor,
tensor_tensor_scan, tensor_reduce, tensor_scalar_reduce (value-returning, dtype= and mask=),
and tensor_scalar_cumulative (destination-passing, as AWS's Beta-1 example calls it)."""

from __future__ import annotations

from typing import Any

from trnsim.compat.neuronxcc.nki._emit import run, single
from trnsim.compat.neuronxcc.nki._errors import b1_error
from trnsim.compat.neuronxcc.nki._isa_core import (
    _alu,
    _dtype,
    _higher,
    _side,
    _t,
    _tile_or_scalar,
)
from trnsim.compat.neuronxcc.nki._nl_reduce import reduce
from trnsim.compat.neuronxcc.nki._state import api, here
from trnsim.compat.neuronxcc.nki._tensor import tensor
from trnsim.errors import ConstraintError
from trnsim.nki._isa_base import engine, reduce_cmd

# ---------------------------------------------------------------- Vector Engine


@api("nisa.tensor_tensor")
def tensor_tensor(
    data1: Any,
    data2: Any,
    op: Any,
    *,
    dtype: Any = None,
    mask: Any = None,
    engine: Any = engine.unknown,
    **kwargs: Any,
) -> tensor:
    """data1 <op> data2 element-wise (same partitions and elements per partition)."""
    a, b = _t(data1, "data1", "tensor_tensor"), _t(data2, "data2", "tensor_tensor")
    if a.shape[0] != b.shape[0]:
        raise b1_error(
            ConstraintError,
            "err_num_partition_mismatch",
            f"number of partitions (dimension 0 size of a tile) mismatch in "
            f"parameters (data1{list(a.shape)}, data2{list(b.shape)}) of "
            "'tensor_tensor'",
        )
    return single(
        "tensor_tensor",
        shape=tuple(a.shape),
        dtype=_dtype(dtype, _higher(a, b)),
        engine=engine,
        inputs={"data1": a, "data2": b},
        attrs={"op": _alu(op)},
        mask=mask,
        label="nisa.tensor_tensor",
    )


@api("nisa.tensor_scalar")
def tensor_scalar(
    data: Any,
    op0: Any,
    operand0: Any,
    reverse0: bool = False,
    op1: Any = None,
    operand1: Any = None,
    reverse1: bool = False,
    *,
    dtype: Any = None,
    mask: Any = None,
    engine: Any = engine.unknown,
    **kwargs: Any,
) -> tensor:
    """(data op0 operand0) op1 operand1 with scalar or (P, 1) operands."""
    x = _t(data, "data", "tensor_scalar")
    return single(
        "tensor_scalar",
        shape=tuple(x.shape),
        dtype=_dtype(dtype, x.dtype),
        engine=engine,
        inputs={
            "data": x,
            "operand0": _tile_or_scalar(operand0, "operand0", "tensor_scalar"),
            "operand1": _tile_or_scalar(operand1, "operand1", "tensor_scalar"),
        },
        attrs={"op0": _alu(op0), "reverse0": reverse0, "op1": _alu(op1), "reverse1": reverse1},
        mask=mask,
        label="nisa.tensor_scalar",
    )


@api("nisa.scalar_tensor_tensor")
def scalar_tensor_tensor(
    *,
    data: Any,
    op0: Any,
    operand0: Any,
    op1: Any,
    operand1: Any,
    reverse0: bool = False,
    reverse1: bool = False,
    dtype: Any = None,
    mask: Any = None,
    **kwargs: Any,
) -> tensor:
    """(data op0 operand0) op1 operand1, operand0 a scalar or (P, 1), operand1 a tile."""
    x = _t(data, "data", "scalar_tensor_tensor")
    o1 = _t(operand1, "operand1", "scalar_tensor_tensor")
    return single(
        "scalar_tensor_tensor",
        shape=tuple(x.shape),
        dtype=_dtype(dtype, _higher(x, o1)),
        inputs={
            "data": x,
            "operand0": _tile_or_scalar(operand0, "operand0", "scalar_tensor_tensor"),
            "operand1": o1,
        },
        attrs={"op0": _alu(op0), "op1": _alu(op1), "reverse0": reverse0, "reverse1": reverse1},
        mask=mask,
        label="nisa.scalar_tensor_tensor",
    )


@api("nisa.tensor_tensor_scan")
def tensor_tensor_scan(
    data0: Any,
    data1: Any,
    initial: Any,
    op0: Any,
    op1: Any,
    reverse0: bool = False,
    reverse1: bool = False,
    *,
    dtype: Any = None,
    mask: Any = None,
    **kwargs: Any,
) -> tensor:
    """Per partition r[i] = op1(op0(data0[i], r[i-1]), data1[i]), r[-1] = initial."""
    a, b = _t(data0, "data0", "tensor_tensor_scan"), _t(data1, "data1", "tensor_tensor_scan")
    return single(
        "tensor_tensor_scan",
        shape=tuple(a.shape),
        dtype=_dtype(dtype, _higher(a, b)),
        inputs={
            "data0": a,
            "data1": b,
            "initial": _tile_or_scalar(initial, "initial", "tensor_tensor_scan"),
        },
        attrs={"op0": _alu(op0), "op1": _alu(op1), "reverse0": reverse0, "reverse1": reverse1},
        mask=mask,
        label="nisa.tensor_tensor_scan",
    )


@api("nisa.tensor_reduce")
def tensor_reduce(
    op: Any,
    data: Any,
    axis: Any,
    *,
    mask: Any = None,
    dtype: Any = None,
    negate: bool = False,
    keepdims: bool = False,
    **kwargs: Any,
) -> tensor:
    """Reduce free axes `axis` of data with op."""
    return reduce(
        _alu(op),
        data,
        axis,
        dtype=dtype,
        mask=mask,
        keepdims=keepdims,
        negate=negate,
        api_name="nisa.tensor_reduce",
    )


@api("nisa.tensor_scalar_reduce")
def tensor_scalar_reduce(
    *,
    data: Any,
    op0: Any,
    operand0: Any,
    reduce_op: Any,
    reduce_res: Any,
    reverse0: bool = False,
    dtype: Any = None,
    mask: Any = None,
    **kwargs: Any,
) -> tensor:
    """data op0 operand0, and its reduction over the free axes into reduce_res (P, 1)."""
    x = _t(data, "data", "tensor_scalar_reduce")
    return single(
        "tensor_scalar_reduce",
        shape=tuple(x.shape),
        dtype=_dtype(dtype, x.dtype),
        inputs={
            "data": x,
            "operand0": _tile_or_scalar(operand0, "operand0", "tensor_scalar_reduce"),
        },
        attrs={"op0": _alu(op0), "reduce_op": _alu(reduce_op), "reverse0": reverse0},
        extra_outputs=_side(reduce_res, "reduce_res", "tensor_scalar_reduce"),
        mask=mask,
        label="nisa.tensor_scalar_reduce",
    )


@api("nisa.tensor_scalar_cumulative")
def tensor_scalar_cumulative(
    *,
    dst: Any,
    src: Any,
    op0: Any,
    op1: Any,
    imm0: Any,
    imm1: Any = None,
    reduce_cmd: Any = reduce_cmd.reset_reduce,
    **kwargs: Any,
) -> Any:
    """Per partition running scan reg = op1(op0(src[i], imm0), reg); dst[i] = reg; returns
    dst. The instruction and its rules are the current API's (nki.isa.tensor_scalar_cumulative);
    AWS's Beta-1 examples call it with keywords, writing a declared dst tile."""
    api_name = "tensor_scalar_cumulative"
    d, x = _t(dst, "dst", api_name), _t(src, "src", api_name)
    loc, loops = here()
    run(
        "tensor_scalar_cumulative",
        None,
        domain=tuple(d.shape),
        outputs={"dst": (d, None)},
        inputs={
            "src": x,
            "imm0": _tile_or_scalar(imm0, "imm0", api_name),
            "imm1": _tile_or_scalar(imm1, "imm1", api_name),
        },
        attrs={"op0": _alu(op0), "op1": _alu(op1), "reduce_cmd": reduce_cmd},
        loc=loc,
        loops=loops,
    )
    return dst
