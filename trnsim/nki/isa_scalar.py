"""nki.isa wrappers for Scalar Engine instructions: NKI's signature and docstring, then `_issue`."""

from __future__ import annotations

from typing import Any

from trnsim.nki._isa_base import _issue, engine, reduce_cmd


def activation(
    dst: Any,
    op: Any,
    data: Any,
    bias: Any = None,
    scale: Any = 1.0,
    reduce_op: Any = None,
    reduce_res: Any = None,
    reduce_cmd: reduce_cmd = reduce_cmd.idle,
    engine: engine = engine.scalar,
    name: str | None = None,
) -> Any:
    """dst = op(data * scale + bias) on the Scalar Engine, optional row sum into its registers."""
    return _issue(
        "activation",
        engine,
        name=name,
        dst=dst,
        op=op,
        data=data,
        bias=bias,
        scale=scale,
        reduce_op=reduce_op,
        reduce_res=reduce_res,
        reduce_cmd=reduce_cmd,
    )


def activation_reduce(
    dst: Any,
    op: Any,
    data: Any,
    reduce_op: Any,
    reduce_res: Any,
    bias: Any = None,
    scale: Any = 1.0,
    name: str | None = None,
) -> Any:
    """activation plus the row reduction of its result into reduce_res (P, 1)."""
    return _issue(
        "activation_reduce",
        engine.scalar,
        name=name,
        dst=dst,
        op=op,
        data=data,
        reduce_op=reduce_op,
        reduce_res=reduce_res,
        bias=bias,
        scale=scale,
    )


def activate2(
    dst: Any,
    op: Any,
    data: Any,
    imm0: Any,
    imm1: Any,
    op0: Any,
    op1: Any,
    relu_param: Any = 0.0,
    reverse0: bool = False,
    reverse1: bool = False,
    reduce_op: Any = None,
    reduce_res: Any = None,
    reduce_cmd: reduce_cmd = reduce_cmd.idle,
    name: str | None = None,
) -> Any:
    """dst = op((data op0 imm0) op1 imm1) on the Scalar Engine (NC-v4), optional reduction."""
    return _issue(
        "activate2",
        engine.scalar,
        name=name,
        dst=dst,
        op=op,
        data=data,
        imm0=imm0,
        imm1=imm1,
        op0=op0,
        op1=op1,
        relu_param=relu_param,
        reverse0=reverse0,
        reverse1=reverse1,
        reduce_op=reduce_op,
        reduce_res=reduce_res,
        reduce_cmd=reduce_cmd,
    )
