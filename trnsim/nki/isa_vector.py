"""nki.isa wrappers for Vector-engine arithmetic instructions (nki-api.md §7.3): NKI's GA
signature and docstring, then one `_issue` call. Meanings live in trnsim.semantics.

tensor_copy_dynamic_src/dst were removed from GA in 0.4.0: calling them raises a
ConstraintError that names the replacement (their semantics stay registered for the
Beta-1/Beta-2 front ends).
"""

from __future__ import annotations

import warnings
from typing import Any

from trnsim.errors import ConstraintError, SimulationWarning
from trnsim.nki._isa_base import _issue, engine, reduce_cmd
from trnsim.program import capture_location
from trnsim.semantics._ops import op_name, reduce_cmd_name
from trnsim.spec import resolve_dtype

__all__ = [
    "dropout",
    "exponential",
    "iota",
    "memset",
    "rand2",
    "rand_get_state",
    "rand_set_state",
    "reciprocal",
    "rng",
    "scalar_tensor_tensor",
    "set_rng_seed",
    "tensor_copy",
    "tensor_copy_dynamic_dst",
    "tensor_copy_dynamic_src",
    "tensor_copy_predicated",
    "tensor_reduce",
    "tensor_scalar",
    "tensor_scalar_cumulative",
    "tensor_scalar_reduce",
    "tensor_tensor",
    "tensor_tensor_scan",
]


def _op(op: Any) -> Any:
    """The op's canonical name for the instruction record; a bad op passes through unchanged
    so the instruction's check reports it at the user's line."""
    try:
        return op_name(op)
    except ConstraintError:
        return op


def _cmd(cmd: Any) -> Any:
    """reduce_cmd by name ('reset_reduce', ...) for the record; bad values pass through."""
    try:
        return reduce_cmd_name(cmd)
    except ConstraintError:
        return cmd


def tensor_tensor(
    dst: Any,
    data1: Any,
    data2: Any,
    op: Any,
    engine: engine = engine.unknown,
    name: str | None = None,
) -> Any:
    """dst = data1 <op> data2, element-wise (Vector by default; GpSimd for exact int32)."""
    return _issue("tensor_tensor", engine, name=name, dst=dst, data1=data1, data2=data2, op=_op(op))


def tensor_scalar(
    dst: Any,
    data: Any,
    op0: Any,
    operand0: Any,
    reverse0: bool = False,
    op1: Any = None,
    operand1: Any = None,
    reverse1: bool = False,
    engine: engine = engine.unknown,
    name: str | None = None,
) -> Any:
    """dst = (data op0 operand0) op1 operand1 with scalar or (P, 1) operands."""
    return _issue(
        "tensor_scalar",
        engine,
        name=name,
        dst=dst,
        data=data,
        op0=_op(op0),
        operand0=operand0,
        reverse0=reverse0,
        op1=_op(op1),
        operand1=operand1,
        reverse1=reverse1,
    )


def scalar_tensor_tensor(
    dst: Any,
    data: Any,
    op0: Any,
    operand0: Any,
    op1: Any,
    operand1: Any,
    reverse0: bool = False,
    reverse1: bool = False,
    reduce_cmd: reduce_cmd = reduce_cmd.reset_reduce,
    reduce_op: Any = None,
    reduce_res: Any = None,
    name: str | None = None,
) -> Any:
    """dst = (data op0 operand0) op1 operand1 (operand1 a full tile) on the Vector engine."""
    return _issue(
        "scalar_tensor_tensor",
        None,
        name=name,
        dst=dst,
        data=data,
        op0=_op(op0),
        operand0=operand0,
        op1=_op(op1),
        operand1=operand1,
        reverse0=reverse0,
        reverse1=reverse1,
        reduce_cmd=_cmd(reduce_cmd),
        reduce_op=None if reduce_op is Ellipsis else _op(reduce_op),
        reduce_res=reduce_res,
    )


def tensor_tensor_scan(
    dst: Any,
    data0: Any,
    data1: Any,
    initial: Any,
    op0: Any,
    op1: Any,
    reverse0: bool = False,
    reverse1: bool = False,
    name: str | None = None,
) -> Any:
    """Per partition r[i] = op1(op0(data0[i], r[i-1]), data1[i]), r[-1] = initial."""
    return _issue(
        "tensor_tensor_scan",
        None,
        name=name,
        dst=dst,
        data0=data0,
        data1=data1,
        initial=initial,
        op0=_op(op0),
        op1=_op(op1),
        reverse0=reverse0,
        reverse1=reverse1,
    )


def tensor_reduce(
    dst: Any,
    op: Any,
    data: Any,
    axis: Any,
    negate: bool = False,
    keepdims: bool = False,
    name: str | None = None,
) -> Any:
    """Reduce the trailing free axes `axis` of data with op (Vector engine)."""
    return _issue(
        "tensor_reduce",
        None,
        name=name,
        dst=dst,
        op=_op(op),
        data=data,
        axis=axis,
        negate=negate,
        keepdims=keepdims,
    )


def tensor_scalar_reduce(
    dst: Any,
    data: Any,
    op0: Any,
    operand0: Any,
    reduce_op: Any,
    reduce_res: Any = None,
    reverse0: bool = False,
    reduce_cmd: reduce_cmd = reduce_cmd.reset_reduce,
    reduce_init: Any = None,
    reduce_res_negate: bool = False,
    name: str | None = None,
) -> Any:
    """dst = data op0 operand0, reduced over the free axes into the Vector accumulators."""
    return _issue(
        "tensor_scalar_reduce",
        None,
        name=name,
        dst=dst,
        data=data,
        op0=_op(op0),
        operand0=operand0,
        reduce_op=_op(reduce_op),
        reduce_res=reduce_res,
        reverse0=reverse0,
        reduce_cmd=_cmd(reduce_cmd),
        reduce_init=reduce_init,
        reduce_res_negate=reduce_res_negate,
    )


def tensor_scalar_cumulative(
    dst: Any,
    src: Any,
    op0: Any,
    op1: Any,
    imm0: Any,
    imm1: Any = None,
    reduce_cmd: reduce_cmd = reduce_cmd.reset_reduce,
    name: str | None = None,
) -> Any:
    """Per partition running scan reg = op1(op0(src[i], imm0), reg); dst[i] = reg."""
    return _issue(
        "tensor_scalar_cumulative",
        None,
        name=name,
        dst=dst,
        src=src,
        op0=_op(op0),
        op1=_op(op1),
        imm0=imm0,
        imm1=imm1,
        reduce_cmd=_cmd(reduce_cmd),
    )


def tensor_copy(
    dst: Any, src: Any, engine: engine = engine.unknown, name: str | None = None,
    dtype: Any = None,
) -> Any:
    """Copy src to dst within SBUF/PSUM (bit-exact on Vector/GpSimd when dtypes match).

    dst's dtype is the output dtype. `dtype=` is not in the documented GA signature, but AWS's
    current tutorials and kernels pass it equal to dst's dtype (nki-samples'
    matrix-multiplication and MX tutorials: `tensor_copy(dst=sbuf, src=psum, dtype=...)`);
    AWS's hoist-load matmul tutorial passes the HBM result's bf16 for an fp32 dst and matches
    on hardware, where the DMA to HBM casts: dtype= is ignored (a warning when it differs)."""
    if dtype is not None:
        _redundant_dtype("tensor_copy", dst, dtype)
    return _issue("tensor_copy", engine, name=name, dst=dst, src=src)


def tensor_copy_predicated(
    dst: Any, src: Any, predicate: Any, reverse_pred: bool = False, name: str | None = None
) -> Any:
    """dst[i] = src[i] where predicate[i] is non-zero (zero with reverse_pred)."""
    return _issue(
        "tensor_copy_predicated",
        None,
        name=name,
        dst=dst,
        src=src,
        predicate=predicate,
        reverse_pred=reverse_pred,
    )


def reciprocal(dst: Any, data: Any, name: str | None = None) -> Any:
    """dst = 1 / data in fp32 on the Vector engine."""
    return _issue("reciprocal", None, name=name, dst=dst, data=data)


def memset(dst: Any, value: Any, engine: engine = engine.unknown, name: str | None = None) -> Any:
    """Fill dst with a compile-time constant."""
    return _issue("memset", engine, name=name, dst=dst, value=value)


def iota(
    dst: Any, pattern: Any, offset: int = 0, channel_multiplier: int = 0, name: str | None = None
) -> Any:
    """dst = offset + p * channel_multiplier + affine pattern of the free indices (GpSimd)."""
    return _issue(
        "iota",
        None,
        name=name,
        dst=dst,
        pattern=pattern,
        offset=offset,
        channel_multiplier=channel_multiplier,
    )


def exponential(
    dst: Any,
    src: Any,
    max_value: Any = 0.0,
    reduce_res: Any = None,
    reduce_cmd: reduce_cmd = reduce_cmd.idle,
    reduce_init: Any = 0.0,
    name: str | None = None,
) -> Any:
    """dst = exp(src - max_value) on the Vector engine (NC-v4), optional running sum."""
    return _issue(
        "exponential",
        None,
        name=name,
        dst=dst,
        src=src,
        max_value=max_value,
        reduce_res=reduce_res,
        reduce_cmd=_cmd(reduce_cmd),
        reduce_init=reduce_init,
    )


def dropout(dst: Any, data: Any, prob: Any, name: str | None = None) -> Any:
    """Zero each element of data with probability prob (no rescaling)."""
    return _issue("dropout", None, name=name, dst=dst, data=data, prob=prob)


def rng(dst: Any, engine: engine = engine.vector, name: str | None = None) -> Any:
    """32 random bits per element into an integer dst."""
    return _issue("rng", engine, name=name, dst=dst)


def set_rng_seed(src_seeds: Any, name: str | None = None) -> Any:
    """Seed the Vector engine PRNG from a [1, 1] 32-bit tensor."""
    return _issue("set_rng_seed", None, name=name, src_seeds=src_seeds)


def rand2(dst: Any, min: Any, max: Any, name: str | None = None) -> Any:
    """Uniform random values in [min, max] (NC-v4, Vector engine)."""
    return _issue("rand2", None, name=name, dst=dst, min=min, max=max)


def rand_set_state(src_seeds: Any, engine: engine = engine.gpsimd, name: str | None = None) -> Any:
    """Load the engine's XORWOW PRNG states from a uint32 tensor (NC-v3+)."""
    return _issue("rand_set_state", engine, name=name, src_seeds=src_seeds)


def rand_get_state(dst: Any, engine: engine = engine.gpsimd, name: str | None = None) -> Any:
    """Store the engine's XORWOW PRNG states into a uint32 tensor (NC-v3+)."""
    return _issue("rand_get_state", engine, name=name, dst=dst)


def _redundant_dtype(api: str, dst: Any, dtype: Any) -> None:
    """A `dtype=` given to a GA instruction that writes dst: dst's dtype is the output dtype,
    so it is ignored, with a SimulationWarning at the user's line when it names another."""
    want = resolve_dtype(dtype, f"nisa.{api}: dtype=")
    have = getattr(dst, "dtype", None)
    if have is None:
        return
    have = resolve_dtype(have, f"nisa.{api}: dst")
    if have.name != want.name:
        text = (f"nisa.{api}: dtype={want.name} is ignored: dst's dtype {have.name} is the "
                "output dtype (GA instructions write dst's dtype)")
        loc = capture_location()
        if loc is None:
            warnings.warn(text, SimulationWarning, stacklevel=3)
        else:
            warnings.warn_explicit(text, SimulationWarning, loc.filename, loc.lineno,
                                   registry=_WARNED)  # once per line, as warnings.warn does


_WARNED: dict = {}


def _removed(api: str, which: str) -> Any:
    raise ConstraintError(
        f"nisa.{api} was removed in NKI 0.4.0 (deprecated in 0.3.0); use nisa.tensor_copy "
        f"with a dynamic {which} view, e.g. {which}.ap(..., scalar_offset=offset_tensor)",
        capture_location(),
    )


def tensor_copy_dynamic_src(
    dst: Any, src: Any, engine: engine = engine.unknown, name: str | None = None
) -> Any:
    """Removed in NKI 0.4.0: raises, naming nisa.tensor_copy with src.ap(scalar_offset=...)."""
    _removed("tensor_copy_dynamic_src", "src")


def tensor_copy_dynamic_dst(
    dst: Any, src: Any, engine: engine = engine.unknown, name: str | None = None
) -> Any:
    """Removed in NKI 0.4.0: raises, naming nisa.tensor_copy with dst.ap(scalar_offset=...)."""
    _removed("tensor_copy_dynamic_dst", "dst")
