"""Semantics of Scalar Engine instructions: activation, activation_reduce, activate2.

Pure numpy; knows nothing about time.

ScalarE computes in fp32 (nki-api.md §5A.2): inputs are converted to fp32, scale/bias or the
op0/op1 stage are fp32 operations (each rounded), the activation function is evaluated and
rounded to fp32, and the result is cast to dst's dtype on the way out. The hardware evaluates
the functions with unpublished piecewise polynomials; we evaluate the exact function in float64
on the fp32 input and round once.

Valid input ranges (§8.2) are recorded with each function. Outside them:
* sin: the hardware has no range reduction and extrapolates its polynomial; AWS documents a
  cubic and sin(9.0) ~ 27.65 (nki.api.shared, "Supported Activation Functions"). We return
  the cubic Taylor expansion of sin at the nearer endpoint, -d + d^3/6 with d = x -+ pi,
  which is the limit of the last piece of a fine piecewise-cubic fit and gives
  sin(9.0) = 27.652; a SimulationWarning names the instruction and the count.
* log, arctan, sqrt, rsqrt, reciprocal: the hardware result is undocumented ("invalid"); we
  return the exact math value (AWS's simulator reproduces the hardware for sin only) and emit
  a SimulationWarning.

Accumulator registers (§8.3): core.accumulators["scalar"], one fp32 per lane (lane = the
absolute partition of `data`), shared by the three instructions and persistent across
instructions. reduce_cmd: idle leaves them, reset sets the reduce op's identity, reduce
combines the row reduction of the fp32 activation output into them, reset_reduce = reset
then reduce; reduce_res (P, 1), when given, receives the registers after the command.
load_reduce has no documented initial-value operand on ScalarE and is not simulated.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from trnsim.errors import ConstraintError, UnsupportedError
from trnsim.memory import View
from trnsim.program import capture_location
from trnsim.semantics import _ops, semantics
from trnsim.semantics._tensor_rules import warn
from trnsim.spec import is_tensor, start_partition

_SQRT2 = math.sqrt(2.0)
_ERF = np.frompyfunc(math.erf, 1, 1)
GELU_SIGMOID_K = 1.702  # gelu_apprx_sigmoid = x * sigmoid(1.702 x) (nki-api.md §8.2)


def _erf(x: np.ndarray) -> np.ndarray:
    return _ERF(x).astype(np.float64)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _phi(x: np.ndarray) -> np.ndarray:
    """Standard normal CDF."""
    return 0.5 * (1.0 + _erf(x / _SQRT2))


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(0.0, x)


def _gelu_sigmoid_dx(x: np.ndarray) -> np.ndarray:
    s = _sigmoid(GELU_SIGMOID_K * x)
    return s + GELU_SIGMOID_K * x * s * (1.0 - s)


def _sin_extrapolated(x: np.ndarray) -> np.ndarray:
    """sin with no range reduction: the cubic at the nearer of -pi, pi (see module doc)."""
    d = x - np.copysign(np.pi, x)
    return -d + d**3 / 6.0


@dataclass(frozen=True)
class ActivationFn:
    """One activation-table entry: float64 math f(x, alpha) and its valid input range."""

    name: str
    fn: Callable[[np.ndarray, np.ndarray], np.ndarray]
    valid: tuple[float, float] | None = None  # inclusive; None = any input
    on_magnitude: bool = False  # the range bounds |x| (reciprocal: +-[2^-42, 2^42])


_TABLE = (
    ActivationFn("copy", lambda x, a: x),
    ActivationFn("bypass", lambda x, a: x),
    ActivationFn("square", lambda x, a: x * x),
    ActivationFn("sigmoid", lambda x, a: _sigmoid(x)),
    ActivationFn("relu", lambda x, a: np.maximum(x, 0.0)),
    ActivationFn("prelu", lambda x, a: np.where(x >= 0, x, a * x)),
    ActivationFn("gelu", lambda x, a: x * _phi(x)),
    ActivationFn("gelu_dx", lambda x, a: _phi(x) + x * np.exp(-0.5 * x * x) / math.sqrt(2 * np.pi)),
    ActivationFn(
        "gelu_apprx_tanh",
        lambda x, a: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3))),
    ),
    ActivationFn("gelu_apprx_sigmoid", lambda x, a: x * _sigmoid(GELU_SIGMOID_K * x)),
    ActivationFn("gelu_apprx_sigmoid_dx", lambda x, a: _gelu_sigmoid_dx(x)),
    ActivationFn("silu", lambda x, a: x * _sigmoid(x)),
    ActivationFn("silu_dx", lambda x, a: _sigmoid(x) * (1.0 + x * (1.0 - _sigmoid(x)))),
    ActivationFn("tanh", lambda x, a: np.tanh(x)),
    ActivationFn("softplus", lambda x, a: _softplus(x)),
    ActivationFn("mish", lambda x, a: x * np.tanh(_softplus(x))),
    ActivationFn("erf", lambda x, a: _erf(x)),
    ActivationFn("erf_dx", lambda x, a: 2.0 / math.sqrt(np.pi) * np.exp(-x * x)),
    ActivationFn("exp", lambda x, a: np.exp(x)),
    ActivationFn("log", lambda x, a: np.log(x), (2.0**-64, 2.0**64)),
    ActivationFn("sin", lambda x, a: np.sin(x), (-np.pi, np.pi)),
    ActivationFn("arctan", lambda x, a: np.arctan(x), (-np.pi / 2, np.pi / 2)),
    ActivationFn("sqrt", lambda x, a: np.sqrt(x), (2.0**-116, 2.0**118)),
    ActivationFn("rsqrt", lambda x, a: 1.0 / np.sqrt(x), (2.0**-87, 2.0**97)),
    ActivationFn("reciprocal", lambda x, a: 1.0 / x, (2.0**-42, 2.0**42), on_magnitude=True),
    ActivationFn("sign", lambda x, a: np.sign(x)),
    ActivationFn("abs", lambda x, a: np.abs(x)),
)
ACTIVATIONS: dict[str, ActivationFn] = {f.name: f for f in _TABLE}
# Beta-1 accepted numpy functions as `op`: their __name__ where it differs from NKI's.
_NUMPY_NAMES = {"absolute": "abs", "identity": "copy"}

REDUCE_CMDS = ("idle", "reset", "reduce", "reset_reduce", "load_reduce")


def activation_name(op, what: str = "op") -> str:
    """The activation-table name of `op` given as nl.exp, np.exp or 'exp'."""
    if op is None:
        raise ConstraintError(
            f"{what} is required: an activation function ({', '.join(ACTIVATIONS)})"
        )
    name = (
        op
        if isinstance(op, str)
        else (getattr(op, "nki_name", None) or getattr(op, "__name__", None))
    )
    if not isinstance(name, str):
        raise ConstraintError(
            f"{what}={op!r} is not an activation function (known: {', '.join(ACTIVATIONS)})"
        )
    name = _NUMPY_NAMES.get(name, name)
    if name not in ACTIVATIONS:
        raise ConstraintError(
            f"{what}={name!r} is not a Scalar Engine activation function "
            f"(known: {', '.join(ACTIVATIONS)})"
        )
    return name


def reduce_cmd_name(v) -> str:
    if v is None:
        return "idle"
    name = getattr(v, "name", None)
    if isinstance(name, str) and name in REDUCE_CMDS:
        return name
    if isinstance(v, str) and v in REDUCE_CMDS:
        return v
    if isinstance(v, (int, np.integer)) and 0 <= int(v) < len(REDUCE_CMDS):
        return REDUCE_CMDS[int(v)]
    raise ConstraintError(
        f"reduce_cmd={v!r} is not a reduce command (known: {', '.join(REDUCE_CMDS)})"
    )


def apply_activation(name: str, x: np.ndarray, alpha=0.0, instr: str = "activation") -> np.ndarray:
    """op(x) for fp32 x: float64 math rounded to fp32, with the out-of-range policy above."""
    entry = ACTIVATIONS[name]
    xd = np.asarray(x, dtype=np.float64)
    with np.errstate(all="ignore"):
        y = np.asarray(entry.fn(xd, np.asarray(alpha, dtype=np.float64)), dtype=np.float64)
        y = np.broadcast_to(y, xd.shape).astype(np.float32)
        if entry.valid is None:
            return y
        lo, hi = entry.valid
        mag = np.abs(xd) if entry.on_magnitude else xd
        out = (mag < lo) | (mag > hi)
        if not out.any():
            return y
        rng = f"{'+-' if entry.on_magnitude else ''}[{lo:.6g}, {hi:.6g}]"
        if name == "sin":
            y[out] = _sin_extrapolated(xd[out]).astype(np.float32)
            warn(
                f"{instr}: {int(out.sum())} input(s) of sin outside its valid range {rng}; "
                "the Scalar Engine has no range reduction: simulated as the hardware's cubic "
                "extrapolation (use nl.sin for range-reduced sine)"
            )
        else:
            warn(
                f"{instr}: {int(out.sum())} input(s) of {name} outside its valid range {rng}; "
                "hardware results there are undefined (simulated with exact math)"
            )
    return y


def _per_lane(v, p: int) -> np.ndarray | np.float32:
    """A scalar operand, or a (P, 1) tensor as an fp32 column."""
    if is_tensor(v):
        return v.read_f32().reshape(p, 1)
    return np.float32(v)


def _row_reduce(op: str, y: np.ndarray) -> np.ndarray:
    """Reduce each row (lane) of fp32 y with an ALU op; fp32 result."""
    with np.errstate(all="ignore"):
        if op == "add":
            return y.astype(np.float64).sum(axis=1).astype(np.float32)
        if op == "maximum":
            return y.max(axis=1)
        if op == "minimum":
            return y.min(axis=1)
        acc = np.full(y.shape[0], _ops.REDUCE_IDENTITY[op], dtype=np.float32)
        for j in range(y.shape[1]):  # abs_max / abs_min: sequential, ties keep the later value
            acc = _ops.apply_binary(op, acc, y[:, j])
        return acc


def accumulate(
    core, instr: str, data: View, y: np.ndarray, op: str, cmd: str, reduce_res: View | None
) -> None:
    """Apply reduce_cmd to the ScalarE accumulator lanes of `data`; read out into reduce_res."""
    if cmd == "load_reduce":
        raise UnsupportedError(
            f"{instr}: reduce_cmd=load_reduce is not simulated on the Scalar "
            "Engine (no documented initial value; supported: idle, reset, "
            "reduce, reset_reduce)",
            capture_location(),
        )
    regs = core.accumulators["scalar"]
    p = data.shape[0]
    lanes = slice(start_partition(data), start_partition(data) + p)
    if cmd in ("reset", "reset_reduce"):
        regs[lanes] = np.float32(_ops.REDUCE_IDENTITY[op])
    if cmd in ("reduce", "reset_reduce"):
        regs[lanes] = _ops.apply_binary(op, regs[lanes], _row_reduce(op, y.reshape(p, -1)))
    if reduce_res is not None:
        reduce_res.write(regs[lanes].reshape(reduce_res.shape))


def _scale_bias(data: View, scale, bias) -> np.ndarray:
    p = data.shape[0]
    x = data.read_f32().reshape(p, -1)
    with np.errstate(all="ignore"):  # (fp32 * fp32 is fp32 already: no copy then)
        x = (x * _per_lane(scale, p)).astype(np.float32, copy=False)
        if bias is not None:
            x = (x + _per_lane(bias, p)).astype(np.float32, copy=False)
    return x


def stage_name(op, what: str) -> str:
    """An activate2 op0/op1 as an ALU op name; None is the no-op stage, bypass."""
    name = _ops.op_name(op, what)
    return "bypass" if name is None else name


# ---------------------------------------------------------------- semantics


@semantics("activation")
def activation(
    core,
    *,
    engine: str,
    dst: View,
    op,
    data: View,
    bias=None,
    scale=1.0,
    reduce_op=None,
    reduce_res: View | None = None,
    reduce_cmd=None,
    **attrs,
) -> None:
    """dst = op(data * scale + bias) in fp32; optional row sum into the ScalarE registers."""
    x = _scale_bias(data, 1.0 if scale is None else scale, bias)
    y = apply_activation(activation_name(op), x, 0.0, "activation")
    dst.write(y.reshape(dst.shape))
    cmd = reduce_cmd_name(reduce_cmd)
    if engine == "scalar":
        accumulate(core, "activation", data, y, _ops.op_name(reduce_op) or "add", cmd, reduce_res)


@semantics("activation_reduce")
def activation_reduce(
    core,
    *,
    engine: str,
    dst: View,
    op,
    data: View,
    reduce_op,
    reduce_res: View,
    bias=None,
    scale=1.0,
    **attrs,
) -> None:
    """activation with reduce_cmd=reset_reduce and the registers read out into reduce_res."""
    x = _scale_bias(data, 1.0 if scale is None else scale, bias)
    y = apply_activation(activation_name(op), x, 0.0, "activation_reduce")
    dst.write(y.reshape(dst.shape))
    accumulate(
        core, "activation_reduce", data, y, _ops.op_name(reduce_op), "reset_reduce", reduce_res
    )


@semantics("activate2")
def activate2(
    core,
    *,
    engine: str,
    dst: View,
    op,
    data: View,
    imm0=None,
    imm1=None,
    op0=None,
    op1=None,
    relu_param=0.0,
    reverse0: bool = False,
    reverse1: bool = False,
    reduce_op=None,
    reduce_res: View | None = None,
    reduce_cmd=None,
    **attrs,
) -> None:
    """v = (data op0 imm0) op1 imm1 (either side reversible), dst = op(v; relu_param), in fp32;
    optional reduction (add/max/min/abs_max/abs_min) into the ScalarE registers."""
    p = data.shape[0]
    v = data.read_f32().reshape(p, -1)
    for stage, imm, rev in ((op0, imm0, reverse0), (op1, imm1, reverse1)):
        name = stage_name(stage, "op")
        if name == "bypass":
            continue
        a = _per_lane(imm, p)
        v = _ops.apply_binary(name, a, v) if rev else _ops.apply_binary(name, v, a)
        v = np.broadcast_to(v, (p, v.shape[1])).astype(np.float32)
    alpha = _per_lane(0.0 if relu_param is None else relu_param, p)
    y = apply_activation(activation_name(op), v, alpha, "activate2")
    dst.write(y.reshape(dst.shape))
    accumulate(
        core,
        "activate2",
        data,
        y,
        _ops.op_name(reduce_op) or "add",
        reduce_cmd_name(reduce_cmd),
        reduce_res,
    )
