"""Beta-1 nisa instructions (part 1: Tensor, Scalar and Vector engine arithmetic) and the
shared helpers of the B1 isa wrappers.

Each call returns the result tile (a fresh SBUF tile, PSUM for the Tensor Engine, or the tile
it is assigned to) and issues the same instruction, with the same GA keyword operands, as the
current API's destination-passing nisa.<op>(dst, ...): one semantics function per instruction.
A few B1 forms write into a destination they are given (dma_copy, nc_stream_shuffle,
select_reduce, tensor_copy_predicated, tensor_copy_dynamic_dst) and return it.
"""

from __future__ import annotations

import enum
from typing import Any

from trnsim import dtypes as dt
from trnsim.compat.neuronxcc.nki import _copy, _create
from trnsim.compat.neuronxcc.nki import _math as M
from trnsim.compat.neuronxcc.nki._emit import run, single
from trnsim.compat.neuronxcc.nki._errors import b1_error
from trnsim.compat.neuronxcc.nki._index import IndexExpr, as_mask, input_space_mask
from trnsim.compat.neuronxcc.nki._nl_data import matmul_pending, no_pe_transpose
from trnsim.compat.neuronxcc.nki._state import api, context, here
from trnsim.compat.neuronxcc.nki._tensor import tensor
from trnsim.dtype_promotion import promote
from trnsim.errors import ConstraintError
from trnsim.nki._isa_base import _engine_name, engine, nc_version, reduce_cmd
from trnsim.semantics._ops import op_name


class dge_mode(enum.IntEnum):
    """B1 numbering (B2/GA renumbered: unknown=0, swdge=1, hwdge=2, none=3)."""

    none = 0
    swdge = 1
    hwdge = 2
    unknown = 3


tensor_engine = engine.tensor
vector_engine = engine.vector
scalar_engine = engine.scalar
gpsimd_engine = engine.gpsimd
unknown_engine = engine.unknown
dma_engine = engine.dma


class _Fp32:
    min = -3.4028234663852886e38  # 0xff7fffff, the lowest finite fp32


fp32 = _Fp32()
FP32_MIN = fp32.min


def _alu(op: Any) -> str | None:
    return op_name(op, "op")


def _dtype(dtype: Any, default: dt.DType) -> dt.DType:
    return M.out_dtype(dtype, default)


def _higher(*tiles: Any) -> dt.DType:
    """B1 ISA default output dtype: the higher-precision input."""
    ts = [t.dtype for t in tiles if isinstance(t, tensor)]
    out = ts[0]
    for d in ts[1:]:
        out = promote(out, d)
    return out


def _t(x: Any, name: str, api_name: str) -> tensor:
    return M.tile(x, f"nisa.{api_name}", name)


def _tile_or_scalar(x: Any, name: str, api_name: str) -> Any:
    return _t(x, name, api_name) if isinstance(x, tensor) else x


def _side(x: Any, name: str, api_name: str) -> dict[str, tuple[tensor, None]]:
    """A pre-declared side output (reduce_res, dst_idx) as an extra output of `run`."""
    return {} if x is None else {name: (_t(x, name, api_name), None)}


def get_nc_version() -> nc_version:
    """The NeuronCore version of the simulated chip (gen2 trn1, gen3 trn2, gen4 trn3)."""
    ctx, _ = context("nisa.get_nc_version")
    return nc_version(ctx.chip.nc_version)


# ---------------------------------------------------------------- Tensor Engine


@api("nisa.nc_matmul")
def nc_matmul(
    stationary: Any,
    moving: Any,
    *,
    is_stationary_onezero: bool = False,
    is_moving_onezero: bool = False,
    is_transpose: bool = False,
    tile_position: Any = (),
    tile_size: Any = (),
    mask: Any = None,
    perf_mode: Any = None,
    **kwargs: Any,
) -> tensor:
    """stationary.T @ moving (K on partitions) into a PSUM tile; `psum += ...` accumulates.
    perf_mode="double_row_gen3" (NC-v3+) is the FP8 double-row mode: inputs [K, 2, M] and
    [K, 2, N], contraction over K x 2."""
    st = _t(stationary, "stationary", "nc_matmul")
    mv = _t(moving, "moving", "nc_matmul")
    attrs = {
        "is_stationary_onezero": is_stationary_onezero,
        "is_moving_onezero": is_moving_onezero,
        "is_transpose": is_transpose,
        "tile_position": tuple(tile_position or ()),
        "tile_size": tuple(tile_size or ()),
    }
    mode = _B1_PERF_MODES.get(getattr(perf_mode, "value", perf_mode), perf_mode)
    if mode != "none":
        attrs["perf_mode"] = mode
    return matmul_pending(st, mv, mask, "nisa.nc_matmul", attrs)


# B1 spells the NC-v3 FP8 double-row mode "double_row_gen3" (the GA name is double_row).
_B1_PERF_MODES = {None: "none", "": "none", "none": "none", "double_row_gen3": "double_row"}


@api("nisa.nc_transpose")
def nc_transpose(
    data: Any, *, mask: Any = None, dtype: Any = None, engine: Any = engine.unknown, **kwargs: Any
) -> tensor:
    """2-D partition <-> free transpose (Tensor Engine into PSUM, or Vector up to 32x32)."""
    x = _t(data, "data", "nc_transpose")
    p, f = x.shape[0], M.free_elems(tuple(x.shape))
    eng = getattr(engine, "name", engine)
    vec = eng == "vector" or (eng in (None, "unknown") and p <= 32 and f <= 32)
    if not vec:
        no_pe_transpose("nisa.nc_transpose")
    # The instruction writes data's dtype; another dtype (dtype=, or a destination of another
    # dtype: AWS's flash attention transposes bf16 into an fp32 PSUM tile) is a cast after it,
    # which B1 inserts (nki-api.md nc_transpose)
    want = _dtype(dtype, x.dtype)
    out = single(
        "nc_transpose",
        shape=(f, p),
        dtype=x.dtype,
        buffer="sbuf" if vec else "psum",
        engine="vector" if vec else "tensor",
        inputs={"data": x},
        axes={"data": (1, 0)},
        mask=input_space_mask(mask, (p, f), (1, 0)) if x.ndim == 2 else mask,
        label="nisa.nc_transpose",
        exact_dtype=True,
    )
    if want == x.dtype:
        return out
    cast = _copy._tmp_sbuf((f, p), want) if vec else _create.allocate((f, p), want, "psum", "tmp")
    loc, loops = here()
    _copy.move(cast, out._ready(), loc=loc, loops=loops, what="nisa.nc_transpose")
    return cast


# ---------------------------------------------------------------- Scalar Engine


@api("nisa.activation")
def activation(
    op: Any,
    data: Any,
    *,
    bias: Any = None,
    scale: Any = 1.0,
    reduce_op: Any = None,
    reduce_res: Any = None,
    reduce_cmd: Any = reduce_cmd.idle,
    mask: Any = None,
    dtype: Any = None,
    **kwargs: Any,
) -> tensor:
    """op(data * scale + bias) on the Scalar Engine; optional row reduction (reduce_res)."""
    x = _t(data, "data", "activation")
    _check_scale_bias(x, scale, bias, "activation")
    return single(
        "activation",
        shape=tuple(x.shape),
        dtype=_dtype(dtype, x.dtype),
        inputs={
            "data": x,
            "bias": _tile_or_scalar(bias, "bias", "activation"),
            "scale": _tile_or_scalar(scale, "scale", "activation"),
        },
        attrs={"op": M.op_label(op), "reduce_op": _alu(reduce_op), "reduce_cmd": reduce_cmd},
        extra_outputs=_side(reduce_res, "reduce_res", "activation"),
        mask=mask,
        label="nisa.activation",
    )


@api("nisa.activation_reduce")
def activation_reduce(
    op: Any,
    data: Any,
    *,
    reduce_op: Any,
    reduce_res: Any,
    bias: Any = None,
    scale: Any = 1.0,
    mask: Any = None,
    dtype: Any = None,
    **kwargs: Any,
) -> tensor:
    """activation plus the row reduction of its result into reduce_res (P, 1)."""
    x = _t(data, "data", "activation_reduce")
    _check_scale_bias(x, scale, bias, "activation_reduce")
    return single(
        "activation_reduce",
        shape=tuple(x.shape),
        dtype=_dtype(dtype, x.dtype),
        inputs={
            "data": x,
            "bias": _tile_or_scalar(bias, "bias", "activation_reduce"),
            "scale": _tile_or_scalar(scale, "scale", "activation_reduce"),
        },
        attrs={"op": M.op_label(op), "reduce_op": _alu(reduce_op)},
        extra_outputs=_side(reduce_res, "reduce_res", "activation_reduce"),
        mask=mask,
        label="nisa.activation_reduce",
    )


def _check_scale_bias(x: tensor, scale: Any, bias: Any, name: str) -> None:
    if isinstance(scale, tensor):
        if scale.dtype != dt.float32:
            raise b1_error(
                ConstraintError,
                "err_activation_scale_invalid_type",
                f"'scale' param of '{name}' must be a scalar or vector of type "
                f"float32, got '{scale.dtype}'",
            )
        if M.free_elems(tuple(scale.shape)) != 1 or scale.shape[0] != x.shape[0]:
            raise b1_error(
                ConstraintError,
                "err_activation_scale_scalar_or_vector",
                f"'scale' param of '{name}' can only be a scalar or a vector in "
                f"partition dimension, scale.shape={list(scale.shape)}",
            )
    elif not isinstance(scale, (int, float)) and scale is not None:
        raise b1_error(
            ConstraintError,
            "err_activation_scale_invalid_type",
            f"'scale' param of '{name}' must be a scalar or vector of type float32, "
            f"got {type(scale).__name__}",
        )
    if isinstance(bias, tensor) and bias.dtype.name not in ("float32", "float16", "bfloat16"):
        raise b1_error(
            ConstraintError,
            "err_activation_bias_invalid_type",
            f"'bias' param of '{name}' must be a vector of type float32, float16, "
            f"or bfloat16, got '{bias.dtype}'",
        )
    if bias is None:
        _, st = context(name)
        if st.direct_alloc:
            raise b1_error(
                ConstraintError,
                "err_bias_tensor_must_be_specified_in_allocation",
                f"Bias tensor for {name} must be specified in allocated kernel!",
            )


# ---------------------------------------------------------------- copies, fills, misc


@api("nisa.tensor_copy")
def tensor_copy(
    src: Any, *, mask: Any = None, dtype: Any = None, engine: Any = engine.unknown, **kwargs: Any
) -> tensor:
    """A copy of src within SBUF/PSUM."""
    x = _t(src, "src", "tensor_copy")
    return single(
        "tensor_copy",
        shape=tuple(x.shape),
        dtype=_dtype(dtype, x.dtype),
        engine=engine,
        inputs={"src": x},
        mask=mask,
        label="nisa.tensor_copy",
    )


@api("nisa.tensor_copy_dynamic_src")
def tensor_copy_dynamic_src(
    src: Any, *, mask: Any = None, dtype: Any = None, engine: Any = engine.unknown, **kwargs: Any
) -> tensor:
    """A copy of src, which sits at a runtime offset (src indexed with a 1x1 SBUF tile)."""
    view = src if not isinstance(src, tensor) else _t(src, "src", "tensor_copy_dynamic_src")
    return single(
        "tensor_copy_dynamic_src",
        shape=tuple(view.shape),
        dtype=_dtype(dtype, view.dtype),
        engine=engine,
        inputs={"src": view},
        mask=mask,
        label="nisa.tensor_copy_dynamic_src",
    )


@api("nisa.tensor_copy_dynamic_dst")
def tensor_copy_dynamic_dst(
    *,
    dst: Any,
    src: Any,
    mask: Any = None,
    dtype: Any = None,
    engine: Any = engine.unknown,
    **kwargs: Any,
) -> Any:
    """Copy src into dst, which sits at a runtime offset; returns dst."""
    x = _t(src, "src", "tensor_copy_dynamic_dst")
    _eager("tensor_copy_dynamic_dst", engine, dst, {"src": x}, {}, mask)
    return dst


@api("nisa.tensor_copy_predicated")
def tensor_copy_predicated(
    *,
    src: Any,
    dst: Any,
    predicate: Any,
    reverse_pred: bool = False,
    mask: Any = None,
    dtype: Any = None,
    **kwargs: Any,
) -> Any:
    """dst[i] = src[i] where predicate[i] is non-zero (zero with reverse_pred); returns dst."""
    _eager(
        "tensor_copy_predicated",
        None,
        dst,
        {
            "src": _tile_or_scalar(src, "src", "tensor_copy_predicated"),
            "predicate": _t(predicate, "predicate", "tensor_copy_predicated"),
        },
        {"reverse_pred": reverse_pred},
        mask,
    )
    return dst


@api("nisa.reciprocal")
def reciprocal(data: Any, *, dtype: Any = None, mask: Any = None, engine: Any = engine.unknown,
               **kwargs: Any) -> tensor:
    """1 / data in fp32 on the engine `engine` names (NKI docs v2.21+: Scalar or Vector Engine,
    default unknown): nisa.vector_engine is the precise VectorE instruction (8N cycles),
    nisa.scalar_engine is ScalarE's activation(reciprocal) (N cycles); unknown leaves it to
    the compiler (VectorE unless a compiler rule moves it, timing/compiler.py)."""
    x = _t(data, "data", "reciprocal")
    eng = _engine_name(engine)
    if eng == "scalar":
        return activation("reciprocal", x, dtype=dtype, mask=mask)
    if eng not in (None, "vector"):
        raise ConstraintError(
            f"nisa.reciprocal: engine={getattr(engine, 'name', engine)!r} does not compute "
            "reciprocals; allowed: nisa.vector_engine, nisa.scalar_engine or "
            "nisa.unknown_engine (the default)")
    return single(
        "reciprocal",
        shape=tuple(x.shape),
        dtype=_dtype(dtype, x.dtype),
        engine=eng,
        inputs={"data": x},
        mask=mask,
        label="nisa.reciprocal",
    )


@api("nisa.memset")
def memset(
    shape: Any,
    value: Any,
    dtype: Any,
    *,
    mask: Any = None,
    engine: Any = engine.unknown,
    **kwargs: Any,
) -> tensor:
    """A new tile of `shape` filled with the constant value (first dim: partitions)."""
    shape = tuple(int(s) for s in shape)
    return single(
        "memset",
        shape=shape,
        dtype=_dtype(dtype, dt.float32),
        engine=engine,
        inputs={"value": value},
        mask=mask,
        label="nisa.memset",
    )


@api("nisa.iota")
def iota(expr: Any, dtype: Any, *, mask: Any = None, **kwargs: Any) -> tensor:
    """The values of an affine index expression (nl.arange / nl.mgrid) as a tile (GpSimd)."""
    if not isinstance(expr, IndexExpr):
        raise ConstraintError(
            f"nisa.iota: expr must be an nl.arange/nl.mgrid expression, got {type(expr).__name__}"
        )
    shape = expr.shape if expr.ndim >= 2 else (1, *expr.shape)
    _, coefs = expr.aligned(len(shape))
    pattern = [[c, n] for c, n in zip(coefs[1:], shape[1:], strict=True)]
    return single(
        "iota",
        shape=tuple(shape),
        dtype=_dtype(dtype, dt.int32),
        attrs={"pattern": pattern, "offset": expr.const, "channel_multiplier": coefs[0]},
        mask=mask,
        label="nisa.iota",
    )


@api("nisa.dropout")
def dropout(data: Any, prob: Any, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> tensor:
    """data with each element zeroed with probability prob (no rescaling)."""
    x = _t(data, "data", "dropout")
    return single(
        "dropout",
        shape=tuple(x.shape),
        dtype=_dtype(dtype, x.dtype),
        inputs={"data": x, "prob": _tile_or_scalar(prob, "prob", "dropout")},
        mask=mask,
        label="nisa.dropout",
    )


def _eager(
    opcode: str, eng: Any, dst: Any, inputs: dict[str, Any], attrs: dict[str, Any], mask: Any
) -> None:
    d = _t(dst, "dst", opcode) if isinstance(dst, tensor) else dst
    loc, loops = here()
    run(
        opcode,
        eng,
        domain=tuple(d.shape),
        outputs={"dst": (d, None)},
        inputs=inputs,
        attrs=attrs,
        mask=as_mask(mask),
        loc=loc,
        loops=loops,
    )
