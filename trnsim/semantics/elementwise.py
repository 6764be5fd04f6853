"""Semantics of element-wise Vector/GpSimd/Scalar instructions (nki-api.md §7.3): tensor_tensor,
tensor_scalar, scalar_tensor_tensor, reciprocal. (Copies and fills: copy_fill.py.)

Pure numpy; knows nothing about time. Arithmetic is fp32 (inputs via View.read_f32, results
cast by View.write); bitvec ops work on raw integer bits (nki-api.md §5A.2).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trnsim.memory import View
from trnsim.semantics import _ops, engine_rule, semantics
from trnsim.semantics import _vector_rules as R
from trnsim.spec import fail, is_tensor

_INT32 = ("int32", "uint32")
# GpSimd has native 32-bit integer ALUs (nki-api.md §5A.2); these ops are exact on int32.
_GPSIMD_INT_OPS = ("add", "subtract", "multiply", "maximum", "minimum", *_ops.COMPARISONS)
_WRAPPING = ("add", "subtract", "multiply")
_M32 = np.int64(0xFFFFFFFF)


def _tensors(*xs: Any) -> list[View]:
    return [x for x in xs if x is not None and is_tensor(x)]


def _all_int32(*views: View) -> bool:
    return bool(views) and all(v.dtype.name in _INT32 for v in views)


# ---------------------------------------------------------------- tensor_tensor


@engine_rule("tensor_tensor")
def _tensor_tensor_engine(chip: Any, operands: dict, attrs: dict) -> str | None:
    views = _tensors(operands.get("dst"), operands.get("data1"), operands.get("data2"))
    try:
        name = _ops.op_name(attrs.get("op"))
    except Exception:  # the check reports a bad op at the user's line
        return None
    if name == "power":
        return "gpsimd"  # nl.power runs on GpSimd (nki-api.md §8.1)
    # All-int32/uint32 operands default to GpSimd (exact integer math) unless PSUM is
    # involved (nki-api.md §5A.2, §7.3).
    if _all_int32(*views) and all(v.buffer.space == "sbuf" for v in views):
        return "gpsimd"
    return None


def check_tensor_tensor(
    *, chip: Any, engine: str, attrs: dict, dst: View, data1: View, data2: View
) -> None:
    instr = "tensor_tensor"
    name = R.resolve_op(instr, attrs.get("op"))
    if _ops.is_unary(name):
        fail(
            instr,
            f"op={name} is a unary op",
            "tensor_tensor needs a binary ALU op (use tensor_scalar for unary ops)",
        )
    R.check_op_gen(instr, chip, name)
    if name == "power" and engine != "gpsimd":
        fail(
            instr,
            f"op=power runs on the GpSimd engine only, got engine {engine}",
            "leave engine unknown or pass engine=nisa.gpsimd (SBUF operands only)",
        )
    if _ops.is_bitvec(name):
        R.need_int_dtypes(instr, name, dst=dst, data1=data1, data2=data2)


@semantics("tensor_tensor")
def tensor_tensor(core: Any, *, engine: str, dst: View, data1: View, data2: View, op: Any) -> None:
    """dst = data1 <op> data2: fp32 math, raw bits for bitvec, exact int32 on GpSimd."""
    name = _ops.op_name(op)
    bits = _ops.is_bitvec(name)
    if engine == "gpsimd" and _all_int32(dst, data1, data2) and name in _GPSIMD_INT_OPS:
        x = R.rows(data1, bits=True).astype(np.int64)
        y = R.rows(data2, bits=True).astype(np.int64)
        R.store(dst, _int_exact(name, x, y), bits=name in _WRAPPING)
        return
    a, b = R.rows(data1, bits=bits), R.rows(data2, bits=bits)
    R.store(dst, _ops.apply_binary(name, a, b), bits=bits)


def _int_exact(name: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """GpSimd's 32-bit integer ALU: add/subtract/multiply wrap modulo 2^32 (low bits kept)."""
    if name == "add":
        return x + y
    if name == "subtract":
        return x - y
    if name == "multiply":
        prod = (x & _M32).astype(np.uint64) * (y & _M32).astype(np.uint64)
        return (prod & np.uint64(0xFFFFFFFF)).astype(np.int64)
    if name == "maximum":
        return np.maximum(x, y)
    if name == "minimum":
        return np.minimum(x, y)
    return _ops.ARITH[name](x, y).astype(np.int64)  # comparisons -> 1/0


# ---------------------------------------------------------------- tensor_scalar

# NC-v3 ScalarE runs only multiply->add, multiply alone, add alone (nki-api.md §7.3).
_SCALAR_V3 = {("multiply", "add"), ("multiply", None), ("add", None)}
# NC-v4: assumed to be activate2's pre-activation pairs (nki-api.md §7.2) — not documented.
_SCALAR_V4 = _SCALAR_V3 | {("multiply", "subtract"), ("subtract", None)}


@engine_rule("tensor_scalar")
def _tensor_scalar_engine(chip: Any, operands: dict, attrs: dict) -> str | None:
    try:
        names = {_ops.op_name(attrs.get("op0")), _ops.op_name(attrs.get("op1"))}
    except Exception:
        return None
    if "rsqrt" in names:  # rsqrt: GpSimd (precise, SBUF) or ScalarE (nki-api.md §6.2, §8.1)
        views = _tensors(*operands.values())
        return "gpsimd" if all(v.buffer.space == "sbuf" for v in views) else "scalar"
    return None


def _check_scalar_ops(
    instr: str,
    chip: Any,
    engine: str,
    ops: tuple[str | None, str | None],
    *,
    reverse: tuple[bool, bool],
    operands: tuple[Any, Any],
    data: View,
    allow_unary1: bool = True,
) -> None:
    """Shared rules of tensor_scalar-style (data op0 operand0) op1 operand1."""
    names = ("op0", "op1")
    opnds = ("operand0", "operand1")
    bits = _ops.is_bitvec(ops[0])
    if ops[1] is not None and _ops.is_bitvec(ops[1]) != bits:
        fail(
            instr,
            f"op0={ops[0]} and op1={ops[1]} mix bitvec and arithmetic operators",
            "both ops must be bitvec (integer bits) or both arithmetic (fp32)",
        )
    for i in (0, 1):
        name, opnd = ops[i], operands[i]
        if name is None:
            if i == 1 and opnd is not None:
                fail(
                    instr,
                    f"operand1={opnd!r} is given without op1",
                    "pass op1 too, or leave operand1=None",
                )
            if i == 1 and reverse[1]:
                fail(instr, "reverse1=True is given without op1", "reverse1 needs op1")
            continue
        R.check_op_gen(instr, chip, name, names[i])
        if _ops.is_unary(name):
            if name not in R.TS_UNARY or (i == 1 and not allow_unary1):
                fail(
                    instr,
                    f"{names[i]}={name} is not supported here",
                    f"unary ops allowed: {', '.join(R.TS_UNARY)}",
                )
            if name in R.TS_UNARY_V4:
                R.need_gen(instr, chip, 4, f"{names[i]}={name}")
            R.check_unary_operand(instr, name, opnd, opnds[i])
            continue
        if opnd is None:
            fail(instr, f"{names[i]}={name} needs {opnds[i]}", "pass a number or a (P, 1) tensor")
        R.check_per_partition(instr, opnds[i], opnd, data)
        if bits and not (is_tensor(opnd) or isinstance(opnd, (int, np.integer))):
            fail(
                instr,
                f"bitvec {names[i]}={name} needs an integer {opnds[i]}, got {opnd!r}",
                "pass an int or an integer (P, 1) tensor",
            )


def check_tensor_scalar(
    *,
    chip: Any,
    engine: str,
    attrs: dict,
    dst: View,
    data: View,
    operand0: Any = None,
    operand1: Any = None,
) -> None:
    instr = "tensor_scalar"
    op0 = R.resolve_op(instr, attrs.get("op0"), "op0")
    op1 = R.resolve_op(instr, attrs.get("op1"), "op1", optional=True)
    R.check_same_layout(instr, "data", data, dst=dst)
    _check_scalar_ops(
        instr,
        chip,
        engine,
        (op0, op1),
        reverse=(bool(attrs.get("reverse0")), bool(attrs.get("reverse1"))),
        operands=(operand0, operand1),
        data=data,
    )
    if _ops.is_bitvec(op0):
        if engine != "vector":
            fail(
                instr,
                f"bitvec op0={op0} runs on the Vector engine only, got engine {engine}",
                "pass engine=nisa.vector or leave it unknown",
            )
        R.need_int_dtypes(instr, op0, dst=dst, data=data, operand0=operand0, operand1=operand1)
    if engine == "gpsimd" and "rsqrt" not in (op0, op1):
        fail(
            instr,
            f"the GpSimd engine runs tensor_scalar only for rsqrt, got op0={op0}, op1={op1}",
            "use engine=nisa.vector (or leave engine unknown)",
        )
    if engine == "vector" and "rsqrt" in (op0, op1):
        fail(
            instr,
            "rsqrt does not run on the Vector engine",
            "use engine=nisa.gpsimd (SBUF) or nisa.scalar, or leave engine unknown",
        )
    if engine == "scalar":
        _check_scalar_engine(instr, chip, op0, op1)


def _check_scalar_engine(instr: str, chip: Any, op0: str, op1: str | None) -> None:
    if chip.nc_version < 3:
        fail(
            instr,
            "the Scalar engine runs tensor_scalar from NeuronCore-v3 on; "
            f"{chip.name} is NeuronCore-v{chip.nc_version}",
            "use engine=nisa.vector",
        )
    allowed = _SCALAR_V3 if chip.nc_version == 3 else _SCALAR_V4
    if (op0, op1) not in allowed and not (op1 is None and op0 == "rsqrt"):
        pairs = ", ".join(f"{a}->{b}" if b else f"{a} alone" for a, b in sorted(allowed, key=str))
        fail(
            instr,
            f"the Scalar engine of NeuronCore-v{chip.nc_version} cannot run op0={op0}, op1={op1}",
            f"it runs {pairs}; use engine=nisa.vector",
        )


def _apply_stage(
    name: str | None, data: np.ndarray, operand: np.ndarray, reverse: bool
) -> np.ndarray:
    if name is None:
        return data
    if _ops.is_unary(name):
        return _ops.apply_binary(name, data, data)
    x, y = (operand, data) if reverse else (data, operand)
    return _ops.apply_binary(name, x, y)


def tensor_scalar_values(
    data: View,
    op0: str,
    operand0: Any,
    reverse0: bool,
    op1: str | None = None,
    operand1: Any = None,
    reverse1: bool = False,
) -> tuple[np.ndarray, bool]:
    """(data op0 operand0) op1 operand1 as (P, N) values; also whether they are raw bits."""
    bits = _ops.is_bitvec(op0)
    parts = data.shape[0]
    x = R.rows(data, bits=bits)
    if bits:
        x = x.astype(np.int64)
    s0 = R.per_partition_values(operand0, parts, bits=bits) if operand0 is not None else None
    s1 = R.per_partition_values(operand1, parts, bits=bits) if operand1 is not None else None
    tmp = _apply_stage(op0, x, s0, reverse0)
    return _apply_stage(op1, tmp, s1, reverse1), bits


@semantics("tensor_scalar")
def tensor_scalar(
    core: Any,
    *,
    engine: str,
    dst: View,
    data: View,
    op0: Any,
    operand0: Any,
    reverse0: bool = False,
    op1: Any = None,
    operand1: Any = None,
    reverse1: bool = False,
) -> None:
    """dst = (data op0 operand0) op1 operand1; operands broadcast along the free axis."""
    res, bits = tensor_scalar_values(
        data, _ops.op_name(op0), operand0, reverse0, _ops.op_name(op1), operand1, reverse1
    )
    R.store(dst, res, bits=bits)


# ---------------------------------------------------------------- scalar_tensor_tensor

STT_REDUCE_OPS = ("add", "multiply", "maximum", "minimum")


def check_scalar_tensor_tensor(
    *,
    chip: Any,
    engine: str,
    attrs: dict,
    dst: View,
    data: View,
    operand0: Any,
    operand1: View,
    reduce_res: View | None = None,
) -> None:
    instr = "scalar_tensor_tensor"
    op0 = R.resolve_op(instr, attrs.get("op0"), "op0")
    op1 = R.resolve_op(instr, attrs.get("op1"), "op1")
    for what, name in (("op0", op0), ("op1", op1)):
        if _ops.is_bitvec(name):
            fail(instr, f"{what}={name} is a bitvec op", "only arithmetic ops are supported")
    if _ops.is_unary(op1):
        fail(instr, f"op1={op1} is a unary op", "op1 combines with operand1: use a binary op")
    R.check_same_layout(instr, "data", data, dst=dst, operand1=operand1)
    R.check_psum_pair(instr, "data", data, "operand1", operand1)
    _check_scalar_ops(
        instr,
        chip,
        engine,
        (op0, None),
        reverse=(bool(attrs.get("reverse0")), False),
        operands=(operand0, None),
        data=data,
    )
    R.check_op_gen(instr, chip, op1, "op1")
    rop = R.resolve_op(instr, attrs.get("reduce_op"), "reduce_op", optional=True)
    if rop is None and reduce_res is not None:
        fail(instr, "reduce_res is given without reduce_op", "pass reduce_op (e.g. nl.add)")
    if rop is not None:
        if rop not in STT_REDUCE_OPS:
            fail(
                instr, f"reduce_op={rop} is not supported", f"allowed: {', '.join(STT_REDUCE_OPS)}"
            )
        R.reduce_cmd(instr, attrs.get("reduce_cmd"))
        R.check_per_partition(instr, "reduce_res", reduce_res, data)


@semantics("scalar_tensor_tensor")
def scalar_tensor_tensor(
    core: Any,
    *,
    engine: str,
    dst: View,
    data: View,
    op0: Any,
    operand0: Any,
    op1: Any,
    operand1: View,
    reverse0: bool = False,
    reverse1: bool = False,
    reduce_cmd: Any = "reset_reduce",
    reduce_op: Any = None,
    reduce_res: View | None = None,
) -> None:
    """dst = (data op0 operand0) op1 operand1 with operand1 a full tile; optional (0.7.0)
    reduction of dst along the free axes into the Vector accumulators / reduce_res."""
    tmp, _ = tensor_scalar_values(data, _ops.op_name(op0), operand0, reverse0)
    other = R.rows(operand1)
    res = _apply_stage(_ops.op_name(op1), tmp, other, reverse1)
    dst.write(res.reshape(dst.shape))
    rop = None if reduce_op is Ellipsis else _ops.op_name(reduce_op)
    if rop is not None:
        lanes = _ops.lanes_of(data)
        acc = _ops.accumulate(
            core, "vector", lanes, _ops.reduce_cmd_name(reduce_cmd), rop, _ops.reduce_rows(rop, res)
        )
        if reduce_res is not None:
            reduce_res.write(acc.reshape(reduce_res.shape))


# ---------------------------------------------------------------- reciprocal


@semantics("reciprocal")
def reciprocal(core: Any, *, engine: str, dst: View, data: View) -> None:
    """dst = 1 / data, correctly rounded fp32 (the precise VectorE path)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        dst.write((np.float32(1) / data.read_f32()).reshape(dst.shape))
