"""Semantics of Vector-engine reductions, scans and accumulator instructions (nki-api.md §7.3,
§8.3): tensor_reduce, tensor_scalar_reduce, tensor_scalar_cumulative, tensor_tensor_scan,
exponential.

Pure numpy; knows nothing about time. The per-lane fp32 accumulator registers live in
core.accumulators["vector"] and persist across instructions in program order.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trnsim.memory import View
from trnsim.semantics import _ops, semantics
from trnsim.semantics import _vector_rules as R
from trnsim.semantics.elementwise import _apply_stage, _check_scalar_ops, tensor_scalar_values
from trnsim.spec import elems_of, fail, is_tensor, partitions_of

MAX_REDUCE_AXES = 4


# ---------------------------------------------------------------- tensor_reduce


def reduce_axes(axis: Any, ndim: int) -> tuple[int, ...] | None:
    """axis (int or sequence) as sorted non-negative ints, or None if not integers."""
    items = list(axis) if isinstance(axis, (tuple, list)) else [axis]
    if not items or not all(
        isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in items
    ):
        return None
    return tuple(sorted(int(a) + ndim if a < 0 else int(a) for a in items))


def check_tensor_reduce(*, chip: Any, engine: str, attrs: dict, dst: View, data: View) -> None:
    instr = "tensor_reduce"
    name = R.resolve_op(instr, attrs.get("op"))
    if name not in _ops.REDUCIBLE:
        fail(instr, f"op={name} is not a reduction op", f"allowed: {', '.join(_ops.REDUCIBLE)}")
    ndim = len(data.shape)
    axis = attrs.get("axis")
    axes = reduce_axes(axis, ndim)
    if axes is None:
        fail(instr, f"axis={axis!r} is not an int or a tuple of ints", "e.g. axis=1 or (1, 2)")
    if 0 in axes or any(not 0 < a < ndim for a in axes):
        fail(
            instr,
            f"axis={axis!r} for a {ndim}-D input (partition axis 0 cannot be reduced)",
            f"free axes are 1..{ndim - 1}",
        )
    if len(set(axes)) != len(axes) or axes != tuple(range(axes[0], ndim)):
        fail(
            instr,
            f"axis={axis!r} is not a run of consecutive trailing free axes of a {ndim}-D input",
            f"the axes must end at the last axis ({ndim - 1}), e.g. "
            f"axis={ndim - 1} or {tuple(range(1, ndim))}",
        )
    if len(axes) > MAX_REDUCE_AXES:
        fail(instr, f"axis={axis!r} reduces {len(axes)} axes", f"at most {MAX_REDUCE_AXES}")
    if _ops.is_bitvec(name):
        R.need_int_dtypes(instr, name, dst=dst, data=data)
        if attrs.get("negate"):
            fail(
                instr,
                f"negate=True with bitvec op {name}",
                "negate applies to arithmetic reductions only",
            )
    kept = int(np.prod(data.shape[1 : axes[0]], dtype=np.int64))
    if partitions_of(dst) != partitions_of(data) or elems_of(dst) != kept:
        fail(
            instr,
            f"dst has shape {tuple(dst.shape)} but reducing axes {axes} of data "
            f"{tuple(data.shape)} leaves {partitions_of(data)} partitions x {kept} elements",
            "dst needs the same partitions and the kept elements",
        )


@semantics("tensor_reduce")
def tensor_reduce(
    core: Any,
    *,
    engine: str,
    dst: View,
    op: Any,
    data: View,
    axis: Any,
    negate: bool = False,
    keepdims: bool = False,
) -> None:
    """Reduce trailing free axes: fp32 arithmetic (optionally negated) or integer bits."""
    name = _ops.op_name(op)
    axes = reduce_axes(axis, len(data.shape)) or (len(data.shape) - 1,)
    bits = _ops.is_bitvec(name)
    x = data.read() if bits else data.read_f32()
    x = x.reshape(x.shape[0], int(np.prod(data.shape[1 : axes[0]], dtype=np.int64)), -1)
    res = _ops.reduce_rows(name, x)
    if bits:
        _ops.write_bits(dst, res)
        return
    dst.write((-res if negate else res).reshape(dst.shape))


# ---------------------------------------------------------------- tensor_scalar_reduce

TSR_REDUCE_OPS = ("add", "multiply", "maximum", "minimum")


def check_tensor_scalar_reduce(
    *,
    chip: Any,
    engine: str,
    attrs: dict,
    dst: View,
    data: View,
    operand0: Any,
    reduce_res: View | None = None,
    reduce_init: Any = None,
) -> None:
    instr = "tensor_scalar_reduce"
    op0 = R.resolve_op(instr, attrs.get("op0"), "op0")
    if _ops.is_bitvec(op0):
        fail(instr, f"op0={op0} is a bitvec op", "only arithmetic ops are supported")
    R.check_same_layout(instr, "data", data, dst=dst)
    R.check_max_rank(instr, 4, dst=dst, data=data)
    _check_scalar_ops(
        instr,
        chip,
        engine,
        (op0, None),
        reverse=(bool(attrs.get("reverse0")), False),
        operands=(operand0, None),
        data=data,
    )
    rop = R.resolve_op(instr, attrs.get("reduce_op"), "reduce_op")
    if rop not in TSR_REDUCE_OPS:
        fail(instr, f"reduce_op={rop} is not supported", f"allowed: {', '.join(TSR_REDUCE_OPS)}")
    cmd = R.reduce_cmd(instr, attrs.get("reduce_cmd", "reset_reduce"))
    R.check_per_partition(instr, "reduce_res", reduce_res, data)
    R.check_per_partition(instr, "reduce_init", reduce_init, data)
    if cmd == "load_reduce" and reduce_init is None:
        fail(
            instr,
            "reduce_cmd=load_reduce needs reduce_init",
            "pass reduce_init (a number or a (P, 1) tensor)",
        )


@semantics("tensor_scalar_reduce")
def tensor_scalar_reduce(
    core: Any,
    *,
    engine: str,
    dst: View,
    data: View,
    op0: Any,
    operand0: Any,
    reduce_op: Any,
    reduce_res: View | None = None,
    reverse0: bool = False,
    reduce_cmd: Any = "reset_reduce",
    reduce_init: Any = None,
    reduce_res_negate: bool = False,
) -> None:
    """dst = data op0 operand0; its fp32 row reductions feed the Vector accumulators under
    reduce_cmd; reduce_res (if given) receives the accumulators (negated on request)."""
    res, _ = tensor_scalar_values(data, _ops.op_name(op0), operand0, reverse0)
    dst.write(res.reshape(dst.shape))
    rop = _ops.op_name(reduce_op)
    lanes = _ops.lanes_of(data)
    init = None if reduce_init is None else R.per_partition_values(reduce_init, len(lanes))
    acc = _ops.accumulate(
        core,
        "vector",
        lanes,
        _ops.reduce_cmd_name(reduce_cmd),
        rop,
        _ops.reduce_rows(rop, res),
        init,
    )
    if reduce_res is not None:
        reduce_res.write((-acc if reduce_res_negate else acc).reshape(reduce_res.shape))


# ---------------------------------------------------------------- tensor_scalar_cumulative

CUMULATIVE_OPS = ("add", "subtract", "multiply", "maximum", "minimum")
CUMULATIVE_CMDS = ("idle", "reduce", "reset_reduce", "load_reduce")
_ACCUMULATE = {"add": np.add, "multiply": np.multiply, "maximum": np.maximum, "minimum": np.minimum}


def check_tensor_scalar_cumulative(
    *, chip: Any, engine: str, attrs: dict, dst: View, src: View, imm0: Any, imm1: Any = None
) -> None:
    instr = "tensor_scalar_cumulative"
    op0 = R.resolve_op(instr, attrs.get("op0"), "op0")
    op1 = R.resolve_op(instr, attrs.get("op1"), "op1")
    if _ops.is_bitvec(op0) or _ops.is_unary(op0):
        fail(instr, f"op0={op0} is not a binary arithmetic op", "e.g. nl.add, nl.multiply")
    R.check_op_gen(instr, chip, op0, "op0")
    if op1 not in CUMULATIVE_OPS:
        fail(instr, f"op1={op1} is not a cumulative op", f"allowed: {', '.join(CUMULATIVE_OPS)}")
    R.check_same_layout(instr, "src", src, dst=dst)
    R.check_per_partition(instr, "imm0", imm0, src, fp32=True)
    R.check_per_partition(instr, "imm1", imm1, src, fp32=True)
    cmd = R.reduce_cmd(instr, attrs.get("reduce_cmd", "reset_reduce"))
    if cmd not in CUMULATIVE_CMDS:
        fail(instr, f"reduce_cmd={cmd} is not supported", f"allowed: {', '.join(CUMULATIVE_CMDS)}")
    if cmd == "load_reduce" and imm1 is None:
        fail(instr, "reduce_cmd=load_reduce needs imm1", "pass imm1 (the initial value)")


@semantics("tensor_scalar_cumulative")
def tensor_scalar_cumulative(
    core: Any,
    *,
    engine: str,
    dst: View,
    src: View,
    op0: Any,
    op1: Any,
    imm0: Any,
    imm1: Any = None,
    reduce_cmd: Any = "reset_reduce",
) -> None:
    """Per partition: reg = op1(op0(src[i], imm0), reg); dst[i] = reg (fp32, in order over the
    flattened free elements). reg starts from the op identity (reset_reduce), imm1
    (load_reduce) or the current Vector accumulator (reduce / idle), and is left there."""
    o0, o1 = _ops.op_name(op0), _ops.op_name(op1)
    x = R.rows(src)
    parts = x.shape[0]
    v = _apply_stage(o0, x, R.per_partition_values(imm0, parts), False)
    lanes = _ops.lanes_of(src)
    cmd = _ops.reduce_cmd_name(reduce_cmd)
    acc = core.accumulators["vector"]
    if cmd == "reset_reduce":
        reg = np.full(parts, _ops.REDUCE_IDENTITY[o1], dtype=np.float32)
    elif cmd == "load_reduce":
        reg = R.per_partition_values(imm1, parts).reshape(parts)
    else:
        reg = acc[lanes].astype(np.float32)
    out = _scan(o1, v, reg)
    dst.write(out.reshape(dst.shape))
    if out.shape[1]:
        acc[lanes] = out[:, -1]


def _scan(op: str, v: np.ndarray, reg: np.ndarray) -> np.ndarray:
    """reg = op(v[:, i], reg) for each column i, in fp32; returns every reg."""
    if op in _ACCUMULATE:  # commutative: a sequential fp32 accumulate is the same recurrence
        seq = np.concatenate([reg[:, None], v.astype(np.float32)], axis=1)
        with np.errstate(all="ignore"):
            return _ACCUMULATE[op].accumulate(seq, axis=1, dtype=np.float32)[:, 1:]
    out = np.empty(v.shape, dtype=np.float32)
    for i in range(v.shape[1]):
        reg = _ops.apply_binary(op, v[:, i], reg)
        out[:, i] = reg
    return out


# ---------------------------------------------------------------- tensor_tensor_scan


def check_tensor_tensor_scan(
    *, chip: Any, engine: str, attrs: dict, dst: View, data0: View, data1: View, initial: Any
) -> None:
    instr = "tensor_tensor_scan"
    for what in ("op0", "op1"):
        name = R.resolve_op(instr, attrs.get(what), what)
        if _ops.is_bitvec(name) or _ops.is_unary(name):
            fail(
                instr,
                f"{what}={name} is not a binary arithmetic op",
                "e.g. op0=nl.multiply, op1=nl.add",
            )
        R.check_op_gen(instr, chip, name, what)
    R.check_same_layout(instr, "data0", data0, data1=data1, dst=dst)
    R.check_psum_pair(instr, "data0", data0, "data1", data1)
    if initial is None:
        fail(instr, "initial is required", "pass a number or a (P, 1) tensor")
    R.check_per_partition(instr, "initial", initial, data0)


@semantics("tensor_tensor_scan")
def tensor_tensor_scan(
    core: Any,
    *,
    engine: str,
    dst: View,
    data0: View,
    data1: View,
    initial: Any,
    op0: Any,
    op1: Any,
    reverse0: bool = False,
    reverse1: bool = False,
) -> None:
    """Per partition, in order over the flattened free elements (fp32):
    r[i] = op1(op0(data0[i], r[i-1]), data1[i]), r[-1] = initial; reverse flags swap the
    operands of their op."""
    o0, o1 = _ops.op_name(op0), _ops.op_name(op1)
    a, b = R.rows(data0), R.rows(data1)
    r = R.per_partition_values(initial, a.shape[0]).reshape(-1)
    out = np.empty(a.shape, dtype=np.float32)
    for i in range(a.shape[1]):
        t = _ops.apply_binary(o0, r, a[:, i]) if reverse0 else _ops.apply_binary(o0, a[:, i], r)
        r = _ops.apply_binary(o1, b[:, i], t) if reverse1 else _ops.apply_binary(o1, t, b[:, i])
        out[:, i] = r
    dst.write(out.reshape(dst.shape))


# ---------------------------------------------------------------- exponential


def check_exponential(
    *,
    chip: Any,
    engine: str,
    attrs: dict,
    dst: View,
    src: View,
    max_value: Any = 0.0,
    reduce_res: View | None = None,
    reduce_init: Any = 0.0,
) -> None:
    instr = "exponential"
    R.need_gen(instr, chip, 4, "exponential")
    R.check_same_layout(instr, "src", src, dst=dst)
    R.check_max_rank(instr, 4, dst=dst, src=src)
    R.check_per_partition(instr, "max_value", max_value, src, fp32=True)
    R.check_per_partition(instr, "reduce_res", reduce_res, src)
    R.check_per_partition(instr, "reduce_init", reduce_init, src, fp32=True)
    cmd = R.reduce_cmd(instr, attrs.get("reduce_cmd", "idle"))
    if (
        cmd != "load_reduce"
        and reduce_init is not None
        and (is_tensor(reduce_init) or reduce_init != 0)
    ):
        fail(
            instr,
            f"reduce_init={reduce_init!r} with reduce_cmd={cmd}",
            "reduce_init must be unset or 0.0 unless reduce_cmd is load_reduce",
        )


@semantics("exponential")
def exponential(
    core: Any,
    *,
    engine: str,
    dst: View,
    src: View,
    max_value: Any = 0.0,
    reduce_res: View | None = None,
    reduce_cmd: Any = "idle",
    reduce_init: Any = 0.0,
) -> None:
    """dst = exp(src - max_value) in fp32; the row sums feed the Vector accumulators under
    reduce_cmd, and reduce_res (if given) receives them."""
    x = R.rows(src)
    parts = x.shape[0]
    with np.errstate(all="ignore"):
        e = np.exp(x - R.per_partition_values(max_value, parts)).astype(np.float32)
    dst.write(e.reshape(dst.shape))
    lanes = _ops.lanes_of(src)
    init = None if reduce_init is None else R.per_partition_values(reduce_init, parts)
    acc = _ops.accumulate(
        core,
        "vector",
        lanes,
        _ops.reduce_cmd_name(reduce_cmd),
        "add",
        _ops.reduce_rows("add", e),
        init,
    )
    if reduce_res is not None:
        reduce_res.write(acc.reshape(reduce_res.shape))
