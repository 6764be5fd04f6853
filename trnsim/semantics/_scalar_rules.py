"""Rule checks of the Scalar Engine instructions (activation, activation_reduce, activate2;
nki-api.md §7.2, §8.2, §8.3 and the 2.33 docstrings). Each raises ConstraintError("<instr>:
<what>; <allowed>"); `_issue` adds the user's line. Knows chips and views; nothing about time.
"""

from __future__ import annotations

import numpy as np

from trnsim.semantics import _ops
from trnsim.semantics._tensor_rules import warn
from trnsim.semantics.activation import activation_name, reduce_cmd_name, stage_name
from trnsim.spec import fail, is_tensor

ACTIVATE2_REDUCE_OPS = ("add", "maximum", "minimum", "abs_max", "abs_min")
ACTIVATE2_PAIRS = (
    ("multiply", "add"),
    ("multiply", "subtract"),
    ("multiply", "bypass"),
    ("add", "bypass"),
    ("subtract", "bypass"),
    ("bypass", "bypass"),
)


def _check_common(
    instr: str,
    chip,
    engine: str,
    attrs,
    data,
    bias,
    scale,
    reduce_res,
    cmd: str,
    reduce_op: str | None,
) -> None:
    activation_name(attrs.get("op"))
    gen = chip.nc_version
    if engine == "gpsimd":
        if gen < 4:
            fail(instr, f"engine=gpsimd on {chip.name}", "GpSimd activations need NeuronCore-v4")
        if cmd != "idle" or reduce_res is not None:
            fail(
                instr,
                f"reduce_cmd={cmd} / reduce_res on the GpSimd engine",
                "the accumulator registers exist on the Scalar Engine only",
            )
    if is_tensor(scale) and scale.dtype.name != "float32":
        fail(instr, f"scale has dtype {scale.dtype.name}", "a scale tensor must be float32")
    if (
        scale is not None
        and not is_tensor(scale)
        and not isinstance(scale, (int, float, np.number))
    ):
        fail(instr, f"scale={scale!r}", "a compile-time number or a (P, 1) float32 tensor")
    if is_tensor(bias) and bias.dtype.name == "tfloat32":
        fail(instr, "bias has dtype tfloat32", "any dtype but tfloat32")
    if bias is not None and not is_tensor(bias) and gen < 3:
        fail(
            instr,
            f"bias={bias!r} is a scalar on {chip.name}",
            "NeuronCore-v2 takes a (P, 1) bias tensor; scalar bias needs v3+",
        )
    if bias is not None and gen < 3 and activation_name(attrs.get("op")) == "reciprocal":
        fail(instr, "op=reciprocal with a bias on NeuronCore-v2", "no bias for reciprocal on v2")
    if reduce_op is not None and reduce_op != "add":
        fail(
            instr,
            f"reduce_op={reduce_op!r}",
            "the Scalar Engine registers only sum (reduce_op=nl.add); use activate2 on v4 "
            "for max/min",
        )
    if cmd == "idle" and reduce_op is not None and reduce_res is None:
        warn(
            f"{instr}: reduce_op is given but reduce_cmd=idle leaves the accumulators "
            "untouched (use reduce_cmd=reset_reduce or reduce)"
        )


def check_activation(
    *, chip, engine, attrs, data, bias=None, scale=None, reduce_res=None, **_
) -> None:
    cmd = reduce_cmd_name(attrs.get("reduce_cmd"))
    _check_common(
        "activation",
        chip,
        engine,
        attrs,
        data,
        bias,
        scale,
        reduce_res,
        cmd,
        _ops.op_name(attrs.get("reduce_op"), "reduce_op"),
    )


def check_activation_reduce(
    *, chip, engine, attrs, data, bias=None, scale=None, reduce_res=None, **_
) -> None:
    rop = _ops.op_name(attrs.get("reduce_op"), "reduce_op")
    if rop is None:
        fail("activation_reduce", "reduce_op is required", "reduce_op=nl.add")
    _check_common(
        "activation_reduce", chip, engine, attrs, data, bias, scale, reduce_res, "reset_reduce", rop
    )


def check_activate2(
    *, chip, engine, attrs, data, imm0=None, imm1=None, relu_param=None, reduce_res=None, **_
) -> None:
    instr = "activate2"
    if chip.nc_version < 4:
        fail(
            instr,
            f"not available on {chip.name} (NeuronCore-v{chip.nc_version})",
            "needs NeuronCore-v4 (trn3)",
        )
    activation_name(attrs.get("op"))
    op0, op1 = attrs.get("op0"), attrs.get("op1")
    if op0 is None and op1 is not None:
        fail(instr, f"op1={stage_name(op1, 'op1')!r} without op0", "op1 needs op0")
    pair = (stage_name(op0, "op0"), stage_name(op1, "op1"))
    if pair not in ACTIVATE2_PAIRS:
        fail(
            instr,
            f"(op0, op1) = {pair}",
            "allowed: " + ", ".join(f"({a}, {b})" for a, b in ACTIVATE2_PAIRS),
        )
    for flag, stage, imm, what in (
        ("reverse0", pair[0], imm0, "imm0"),
        ("reverse1", pair[1], imm1, "imm1"),
    ):
        if attrs.get(flag) and stage == "bypass":
            fail(instr, f"{flag}=True with a bypassed stage", f"{flag} needs its op")
        if stage != "bypass" and imm is None:
            fail(instr, f"{what} is None but its op is {stage}", f"give {what}")
    if is_tensor(imm0) and is_tensor(imm1) and imm0.dtype != imm1.dtype:
        fail(
            instr,
            f"imm0 is {imm0.dtype.name} and imm1 is {imm1.dtype.name}",
            "tensor immediates must share a dtype",
        )
    rop = _ops.op_name(attrs.get("reduce_op"), "reduce_op")
    if rop is not None and rop not in ACTIVATE2_REDUCE_OPS:
        fail(instr, f"reduce_op={rop!r}", f"allowed: {', '.join(ACTIVATE2_REDUCE_OPS)}")
    reduce_cmd_name(attrs.get("reduce_cmd"))
    if (
        relu_param is not None
        and not is_tensor(relu_param)
        and not isinstance(relu_param, (int, float, np.number))
    ):
        fail(instr, f"relu_param={relu_param!r}", "a number or a (P, 1) tensor")
