"""Pointwise device kernels: out = OP(inputs) elementwise over HBM views of any shape, strides
and broadcasting, for the PyTorch device; with their float64 references.

Layer: kernel library (trnsim.kernels); NKI API only. The op table (ATen name -> tile bodies +
numpy reference) lives in pointwise_ops.py (unary), pointwise_binary.py (binary),
pointwise_ternary.py (where, masked_fill, addcmul, addcdiv, lerp), pointwise_backward.py
(activation backward ops, dropout) and pointwise_extra.py (further ATen ops); the tiling in
_tiles.py; copies and casts in _pw_copy.py; range reductions in _pw_math.py.

Domains. A launch computes in one of two domains:
* float: engines read every operand as fp32 (int and bool operands exactly below 2^24), compute
  in fp32 and round once into the output's dtype (nki-api.md §5A.2);
* integer (integer or bool outputs; integer comparisons): operands are widened to int32 tiles
  (DMA casts, exact), add/subtract/multiply/max/min/comparisons (also abs, neg, square, clamp)
  run on GpSimd's exact 32-bit integer ALU (wrapping like PyTorch's int32), bitwise ops on
  VectorE's bitvec ALU, floor/trunc division and remainders exactly (pointwise_binary.py),
  selections bit for bit; pow goes through fp32 (exact while results are below 2^24). int8,
  int16 and uint8 results keep the low bits (wrap) as PyTorch does.
int64 operands are int32 pair views (device-kernels.md): named in `int64`, they are read by
their low words (values in int32 range: the backend checks) and written as both words with the
high word the sign extension, so int64 arithmetic is exact while results stay in int32 range.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trnsim.nki import jit
from trnsim.nki import language as nl

from . import _int64 as I64
from . import _tiles as T
from . import (  # noqa: F401  (they fill OPS)
    pointwise_backward,
    pointwise_binary,
    pointwise_extra,
    pointwise_ops,
    pointwise_ternary,
)
from ._common import fail
from ._cores import share
from ._pw_copy import copy_job, run_copy
from ._pw_tile import OPS, ConstPool, OpSpec, TileOps, Turns

FLOAT_DTYPES = ("float32", "bfloat16", "float16")
INT_DTYPES = ("int32", "int16", "int8", "uint8", "bool", "int64")
DTYPES = FLOAT_DTYPES + INT_DTYPES
SBUF_SHARE = 0.75  # of the usable SBUF, for the tiles in flight


@dataclass
class Job:
    """One output of a launch, resolved: operands, domain, tiles and loads."""

    spec: OpSpec
    attrs: dict
    out: Any
    out_dtype: str  # the output's dtype name; "int64" for a pair view
    names: list[str]  # tensor operand names, in load order
    scalars: dict[str, Any]
    dtypes: dict[str, str]
    domain: str  # "float" | "int"
    operands: list[T.Operand] = field(default_factory=list)
    loads: list[T.Load] = field(default_factory=list)
    tiles: list[T.Tile] = field(default_factory=list)


def _dtype_name(t: Any, pair: bool, what: str) -> str:
    name = "int64" if pair else t.dtype.name
    if name not in DTYPES:
        fail(
            f"{what}: dtype {t.dtype.name} is not supported (supported: {', '.join(DTYPES)}; "
            "int64 as an int32 pair view named in int64=)"
        )
    return name


def _pair_names(int64: Any, names: list[str]) -> set[str]:
    if int64 is None or int64 is False:
        return set()
    items = [int64] if isinstance(int64, (str, int)) else list(int64)
    out = set()
    for it in items:
        if isinstance(it, int) and not isinstance(it, bool):
            if not 0 <= it <= len(names):
                fail(
                    f"pointwise: int64={int64!r} names operand {it}; there are "
                    f"{len(names) + 1} tensor operands (0 = out)"
                )
            out.add("out" if it == 0 else names[it - 1])
        elif it == "out" or it in names:
            out.add(it)
        else:
            fail(
                f"pointwise: int64={int64!r} names {it!r}, not a tensor operand "
                f"(operands: out, {', '.join(names)})"
            )
    return out


def _split_attrs(spec: OpSpec, attrs: dict, what: str) -> tuple[dict, dict]:
    """(op attributes with defaults, scalar operands) from the keyword arguments."""
    op_attrs, scalars = dict(spec.attrs), {}
    for k, val in attrs.items():
        if k in spec.attrs:
            op_attrs[k] = val
        elif k in spec.args and k in spec.scalar_args:
            scalars[k] = val
        else:
            allowed = [*spec.attrs, *spec.scalar_args]
            fail(
                f"{what}: unexpected argument {k}={val!r} (this op takes "
                f"{', '.join(allowed) if allowed else 'no keyword arguments'})"
            )
    return op_attrs, scalars


def _domain(spec: OpSpec, out_dtype: str, dtypes: dict, scalars: dict) -> str:
    if spec.result == "bool":
        ints = all(d in INT_DTYPES for d in dtypes.values()) and all(
            isinstance(s, (int, np.integer)) or s is None for s in scalars.values()
        )
        return "int" if ints else "float"
    return "int" if out_dtype in INT_DTYPES else "float"


def resolve(
    spec: OpSpec, out: Any, inputs: Sequence[Any], attrs: dict, int64: Any, what: str
) -> Job:
    """Check one output's operands against the op and plan its tiles."""
    op_attrs, scalars = _split_attrs(spec, attrs, what)
    names = [n for n in spec.args if n not in scalars]
    if len(inputs) > len(names):
        fail(
            f"{what}: {len(inputs)} tensor inputs given; the op takes {len(spec.args)} "
            f"operands ({', '.join(spec.args)}), {len(scalars)} of them as scalars"
        )
    missing = [n for n in names[len(inputs) :] if n not in spec.scalar_args]
    if missing:
        fail(
            f"{what}: missing operand(s) {', '.join(missing)} (operands: "
            f"{', '.join(spec.args)}; scalars go in keyword arguments)"
        )
    for n in names[len(inputs) :]:
        scalars[n] = None
    names = names[: len(inputs)]
    pairs = _pair_names(int64, names)
    out_pair = "out" in pairs
    out_dtype = _dtype_name(out, out_pair, f"{what}: out")
    tensors = dict(zip(names, inputs, strict=True))
    dtypes = {n: _dtype_name(t, n in pairs, f"{what}: operand '{n}'") for n, t in tensors.items()}
    domain = _domain(spec, out_dtype, dtypes, scalars)
    body = spec.int_body if domain == "int" else spec.float_body
    if body is None:
        kinds = "integer or bool" if domain == "int" else "floating-point"
        fail(
            f"{what}: op {spec.name} does not take {kinds} operands here (out {out_dtype}, "
            f"inputs {', '.join(dtypes.values()) or 'scalars'})"
        )
    for n, s in scalars.items():
        if s is not None and domain == "int" and not isinstance(s, (int, np.integer)):
            fail(
                f"{what}: scalar {n}={s!r} is not an integer; integer outputs take integer scalars"
            )
    job = Job(spec, op_attrs, out, out_dtype, names, scalars, dtypes, domain)
    shape = I64.element_shape(out) if out_pair else tuple(out.shape)
    job.operands.append(_operand(out, shape, out_pair, f"{what}: out"))
    for i, n in enumerate(names, start=1):
        job.operands.append(_operand(tensors[n], shape, n in pairs, f"{what}: operand '{n}'"))
        native = n in spec.predicates or domain == "float" or dtypes[n] in ("int32", "int64")
        job.loads.append(T.Load(i, None if native else nl.int32))
    job.tiles = T.plan(shape, job.operands, T.free_budget(_bytes_per_elem(job), SBUF_SHARE))
    return job


def _operand(t: Any, shape: tuple, pair: bool, what: str) -> T.Operand:
    return T.pair_operand(t, shape, what) if pair else T.operand(t, shape, what)


def _bytes_per_elem(job: Job) -> int:
    size = {
        "int64": 8,
        "bool": 1,
        "int8": 1,
        "uint8": 1,
        "int16": 2,
        "bfloat16": 2,
        "float16": 2,
        "int32": 4,
        "float32": 4,
    }
    n = size[job.out_dtype] + 4 * (job.spec.temps + 1)
    for ld in job.loads:
        n += 4 if ld.dtype is not None else size[job.dtypes[job.names[ld.index - 1]]]
    return n


def _operand_values(job: Job, loaded: list) -> dict:
    v = dict(job.scalars)
    for name, ld, t in zip(job.names, job.loads, loaded, strict=True):
        op = job.operands[ld.index]
        if op.pair:
            t = I64.low_word(t)
        if name in job.spec.predicates and t.dtype.name == "bool":
            t = t.view(nl.uint8)
        v[name] = t
    return v


def _run_tile(job: Job, tile: T.Tile, loaded: list, pool: ConstPool, turns: Turns) -> None:
    k = TileOps(tile.shape, pool, turns, job.out_dtype)
    v = _operand_values(job, loaded)
    out_op = job.operands[0]
    if out_op.pair:
        res = I64.pair_tile(tile.shape, "out_i64")
        dst = I64.low_word(res)
    else:
        res = k.tmp(job.out.dtype, "out_tile")
        narrow = job.domain == "int" and job.out_dtype != "int32"
        dst = k.tmp(nl.int32, "out_i32") if narrow else res
    body = job.spec.int_body if job.domain == "int" else job.spec.float_body
    body(k, dst, v, job.attrs)
    if out_op.pair:
        I64.sign_extend(res)
    elif dst is not res:
        _narrow(k, res, dst, job.out_dtype)
    T.store(tile, out_op, 0, res)


def _narrow(k: TileOps, res: Any, src: Any, dtype: str) -> None:
    """int32 results into a narrower integer output: bool = (x != 0); int8/int16/uint8 keep
    the low bits (a VectorE bitvec op stores the low bits of its 32-bit lanes)."""
    if dtype == "bool":
        k.ts(res, src, nl.not_equal, 0.0)
    else:
        k.ts(res, src, nl.bitwise_or, 0)


def lookup(op: Any, what: str) -> OpSpec:
    spec = OPS.get(op) if isinstance(op, str) else None
    if spec is None and op != "copy":
        fail(f"{what}: op={op!r} is not a pointwise op (known: {', '.join(sorted(OPS))}, copy)")
    return spec


def run_jobs(jobs: list[Job], what: str) -> None:
    """Every tile of every job in one prefetched stream (this core's share on kernel[2])."""
    pool, turns = ConstPool(), Turns()
    work = share([T.Work(job, tile, job.operands, job.loads) for job in jobs for tile in job.tiles])
    for w, loaded in T.prefetched_work(work, "pw_in"):
        _run_tile(w.tag, w.tile, loaded, pool, turns)


def _launch(
    outs: list, input_lists: list[list], op: Any, attrs: dict, int64: Any, what: str
) -> None:
    spec = lookup(op, what)
    if spec is None:
        jobs = [
            copy_job(out, ins, attrs, int64, what)
            for out, ins in zip(outs, input_lists, strict=True)
        ]
        run_copy(jobs)
        return
    per = _per_tensor_attrs(attrs, len(outs), what)
    jobs = [
        resolve(spec, out, ins, per[i], int64, what)
        for i, (out, ins) in enumerate(zip(outs, input_lists, strict=True))
    ]
    run_jobs(jobs, what)


def _per_tensor_attrs(attrs: dict, n: int, what: str) -> list[dict]:
    """Keyword arguments per output: a list value gives one value per output."""
    out = [{} for _ in range(n)]
    for key, val in attrs.items():
        if isinstance(val, list):
            if len(val) != n:
                fail(f"{what}: {key} is a list of {len(val)} values for {n} outputs")
            for i in range(n):
                out[i][key] = val[i]
        else:
            for i in range(n):
                out[i][key] = val
    return out


@jit
def pointwise(out, *inputs, op: str, int64=None, **attrs):
    """out = OP(*inputs) elementwise (ATen op names), inputs broadcast to out.shape.

    Dimensions:
        out: any shape S (strided views, storage offsets); inputs broadcastable to S (numpy
        rules, stride-0 dims allowed).

    Args:
        out: HBM tensor written in full (may be the same view as an input: in place).
        inputs: HBM tensors, in the op's operand order (see `ops()`); an operand may instead
            be a Python scalar keyword argument (other=2.0, exponent=3, min=None, ...).
        op: the op's ATen name ("add", "gelu", "eq", "copy", ...).
        int64: operands that are int64 pair views (device-kernels.md), by position (0 = out,
            1 = first input, ...) or by name ("out", "input", ...).
        attrs: the op's scalar attributes (alpha, negative_slope, rounding_mode, ...).

    Returns:
        nothing: the result is in `out`.

    Notes:
        fp32 compute, one rounding into out's dtype; loads of tile i+1 are issued before tile
        i is computed; tensor_tensor work alternates between VectorE and GpSimd, affine steps
        and copies between VectorE and ScalarE (module doc for the integer domain).
    """
    _launch([out], [list(inputs)], op, attrs, int64, f"pointwise({op})")


@jit
def pointwise_multi(outs, *input_lists, op: str, int64=None, **attrs):
    """The same op over lists of tensors in one launch (PyTorch's _foreach_* ops).

    Args:
        outs: list of HBM output tensors, each its own shape.
        input_lists: one list per tensor operand, each as long as `outs`.
        op, int64, attrs: as `pointwise`; an attribute given as a list has one value per
            output (e.g. _foreach_add's ScalarList: other=[1.0, 2.0, ...]).
    """
    what = f"pointwise_multi({op})"
    outs = list(outs)
    lists = [list(x) for x in input_lists]
    for i, lst in enumerate(lists):
        if len(lst) != len(outs):
            fail(f"{what}: input list {i} has {len(lst)} tensors for {len(outs)} outputs")
    per_out = [[lst[j] for lst in lists] for j in range(len(outs))]
    _launch(outs, per_out, op, attrs, int64, what)


def ops() -> dict[str, tuple[str, ...]]:
    """Every supported op name with its operand names (copy: input)."""
    out = {name: spec.args for name, spec in sorted(OPS.items())}
    out["copy"] = ("input",)
    return out


def pointwise_ref(op: str, *inputs: Any, **attrs: Any) -> np.ndarray:
    """float64 (int64 for integer-only ops) numpy reference of pointwise(op): inputs are numpy
    arrays in the op's operand order (int64 arrays as they are, not pair views), scalars as
    keyword arguments."""
    if op == "copy":
        return np.asarray(inputs[0])
    spec = OPS[op]
    op_attrs, scalars = dict(spec.attrs), {}
    for k, val in attrs.items():
        (op_attrs if k in spec.attrs else scalars)[k] = val
    names = [n for n in spec.args if n not in scalars]
    v = dict(scalars)
    ints = all(np.asarray(x).dtype.kind in "biu" for x in inputs)
    for n, x in zip(names, inputs, strict=False):
        x = np.asarray(x)
        if n in spec.predicates:
            v[n] = x.astype(bool)
        else:
            v[n] = x.astype(np.int64 if (ints and spec.float_body is None) else np.float64)
    for n in names[len(inputs) :]:
        v.setdefault(n, None)
    with np.errstate(all="ignore"):
        return np.asarray(spec.ref(v, op_attrs))


__all__ = ["ops", "pointwise", "pointwise_multi", "pointwise_ref"]
