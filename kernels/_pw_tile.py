"""Per-tile building blocks of the pointwise kernels: the op table's entry (OpSpec) and its
registry, and TileOps, the instruction helpers an op body uses on one tile.

Layer: kernel library (trnsim.kernels); NKI API only. An op body computes one SBUF tile of the
result from SBUF tiles (or Python scalars) of its operands; it never sees HBM, tiling or dtypes
of the output beyond `dst`. Engines compute in fp32 and round once into `dst`'s dtype
(nki-api.md §5A.2); bodies keep intermediates in fp32 scratch tiles (`TileOps.tmp`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

from ._common import fail

F32 = nl.float32
I32 = nl.int32
U8 = nl.uint8
VECTOR, SCALAR, GPSIMD = nisa.engine.vector, nisa.engine.scalar, nisa.engine.gpsimd
FLT_MAX = 3.4028234663852886e38  # largest finite fp32
_HALF = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16}


Body = Callable[..., None]  # body(k: TileOps, dst, v: dict[str, tile | scalar], a: dict) -> None


@dataclass(frozen=True)
class OpSpec:
    """One entry of the pointwise op table (ATen name -> tile bodies + reference).

    args: operand names in ATen order; each is a tensor (positional argument of the kernel)
        or, when listed in `scalar_args`, may instead be a Python scalar keyword argument.
    float_body: computes in fp32 (any float/int/bool inputs, float or bool output).
    int_body: computes on int32 tiles (exact integer math on GpSimd) for integer outputs (or
        integer comparisons); None: the op takes no integer results.
    ref: float64 (int64 in the integer domain) numpy reference: ref(v, a) with v the operand
        arrays/scalars by name and a the attributes.
    attrs: attribute names and defaults (alpha, negative_slope, ...).
    temps: fp32 scratch tiles a body holds at once (sizes the tiles to the SBUF).
    result: "same" (the output dtype decides the domain) or "bool" (a predicate: the inputs
        decide the domain; the output is typically bool).
    predicates: operands used as predicates (bool or uint8 masks): loaded as they are.
    """

    name: str
    args: tuple[str, ...]
    float_body: Body | None
    int_body: Body | None
    ref: Callable[[dict, dict], Any]
    attrs: Mapping[str, Any] = field(default_factory=dict)
    temps: int = 1
    scalar_args: tuple[str, ...] = ()
    result: str = "same"
    predicates: tuple[str, ...] = ()


OPS: dict[str, OpSpec] = {}


def register(*specs: OpSpec) -> None:
    """Add entries to the op table (one name, one entry)."""
    for s in specs:
        if s.name in OPS:
            raise ValueError(f"pointwise op {s.name!r} registered twice")
        OPS[s.name] = s


def dtype_scalar(value: float, dtype: str) -> float:
    """A Python scalar as PyTorch applies it to a `dtype` tensor in add/sub (alpha and scalar
    operands are converted to the tensor's dtype: through fp32 to bf16 / fp16)."""
    v = float(np.float32(value))
    if dtype in _HALF:
        v = float(np.asarray(v, np.float32).astype(_HALF[dtype]))
    return v


def wrap32(v: int) -> int:
    """A Python int reduced to int32 (two's complement wrap, as the int32 ALU wraps)."""
    return (int(v) + 2**31) % 2**32 - 2**31


def is_tile(x: Any) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype")


class Turns:
    """Round-robin engine choice for instructions more than one engine can run, kept per
    launch so consecutive tiles land on different engines."""

    def __init__(self) -> None:
        self.n = {"tt": 0, "copy": 0, "affine": 0, "mul_then": 0}

    def next(self, kind: str, engines: tuple) -> Any:
        i = self.n[kind]
        self.n[kind] = i + 1
        return engines[i % len(engines)]


class ConstPool:
    """[128, 1] constant tiles (memset once per launch) for activation biases and integer
    scalars: ScalarE takes a bias as a (P, 1) tile on every generation (NC-v2 takes no
    immediate bias), GpSimd's exact int32 ops take tensor operands only."""

    def __init__(self) -> None:
        self.tiles: dict[tuple, Any] = {}

    def get(self, value: float | int, dtype: Any, parts: int) -> Any:
        key = (value, str(dtype))
        t = self.tiles.get(key)
        if t is None:
            t = nl.ndarray((128, 1), dtype=dtype, buffer=nl.sbuf, name="const")
            nisa.memset(dst=t, value=value, engine=GPSIMD)
            self.tiles[key] = t
        return t[:parts]


class TileOps:
    """The instructions an op body issues on one tile of shape `shape` (partitions first)."""

    def __init__(
        self, shape: tuple[int, ...], pool: ConstPool, turns: Turns, out_dtype: str = "float32"
    ):
        self.shape = shape
        self.out_dtype = out_dtype  # the kernel output's dtype name (int64 for pair views)
        self.parts = shape[0]
        self.pool = pool
        self.turns = turns
        self.nc = nisa.get_nc_version()

    # -- tiles
    def tmp(self, dtype: Any = F32, name: str = "pw_tmp") -> Any:
        """A fresh SBUF scratch tile of the tile's shape."""
        return nl.ndarray(self.shape, dtype=dtype, buffer=nl.sbuf, name=name)

    def const(self, value: float) -> Any:
        """A (P, 1) fp32 tile holding `value` (an activation bias)."""
        return self.pool.get(float(value), F32, self.parts)

    def _spread(self, t: Any) -> Any:
        for _ in self.shape[2:]:
            t = t.expand_dim(len(t.shape))
        for d, n in enumerate(self.shape[1:]):
            t = t.broadcast(d + 1, n)
        return t

    def iconst(self, value: int) -> Any:
        """An int32 tile of the tile's shape holding `value` (a stride-0 view of a (P, 1) tile),
        for GpSimd's exact int32 tensor_tensor."""
        return self._spread(self.pool.get(int(value), nl.int32, self.parts))

    # -- instructions
    def tt(self, dst: Any, a: Any, b: Any, op: Any, engine: Any = None) -> None:
        """dst = a <op> b (tiles), on VectorE and GpSimd by turns unless `engine` is given."""
        if engine is None:
            engine = self.turns.next("tt", (VECTOR, GPSIMD))
        nisa.tensor_tensor(dst=dst, data1=a, data2=b, op=op, engine=engine)

    def ts(
        self,
        dst: Any,
        a: Any,
        op0: Any,
        c0: Any = None,
        op1: Any = None,
        c1: Any = None,
        rev0: bool = False,
        rev1: bool = False,
        engine: Any = None,
    ) -> None:
        """dst = (a <op0> c0) <op1> c1 with scalar operands, on VectorE; a multiply/add of
        scalars goes to ScalarE every other time (an activation copy with scale and bias
        rounds the same two ways), or always with engine=SCALAR."""
        aff = self._affine_form(op0, c0, op1, c1) if not (rev0 or rev1) else None
        if engine is None and aff is not None:
            engine = self.turns.next("affine", (VECTOR, SCALAR))
        if aff is not None and engine == SCALAR:
            self.act(dst, nl.copy, a, scale=aff[0], bias=aff[1])
            return
        nisa.tensor_scalar(
            dst=dst,
            data=a,
            op0=op0,
            operand0=c0,
            reverse0=rev0,
            op1=op1,
            operand1=c1,
            reverse1=rev1,
            engine=VECTOR,
        )

    @staticmethod
    def _affine_form(op0: Any, c0: Any, op1: Any, c1: Any) -> tuple[float, float] | None:
        """(scale, bias) when (x op0 c0) op1 c1 is x * scale + bias with scalars, else None."""
        if is_tile(c0) or is_tile(c1):
            return None
        if op0 is nl.multiply and op1 is None:
            return float(c0), 0.0
        if op0 is nl.multiply and op1 in (nl.add, nl.subtract):
            return float(c0), float(c1) if op1 is nl.add else -float(c1)
        if op0 in (nl.add, nl.subtract) and op1 is None:
            return 1.0, float(c0) if op0 is nl.add else -float(c0)
        return None

    def mul_then(self, dst: Any, a: Any, c: float, op: Any, b: Any, engine: Any = None) -> None:
        """dst = (a * c) <op> b with b a tile: a VectorE scalar_tensor_tensor, or (every other
        time, or with engine=SCALAR) a ScalarE scaled copy then a GpSimd tensor_tensor (the
        same two roundings), to move work off VectorE in long composites."""
        if engine is None:
            engine = self.turns.next("mul_then", (VECTOR, SCALAR))
        if engine == VECTOR:
            self.stt(dst, a, nl.multiply, float(c), op, b)
            return
        t = self.tmp(name="mul_then")
        self.act(t, nl.copy, a, scale=float(c))
        self.tt(dst, t, b, op, GPSIMD)

    def stt(
        self,
        dst: Any,
        a: Any,
        op0: Any,
        c0: Any,
        op1: Any,
        b: Any,
        rev0: bool = False,
        rev1: bool = False,
    ) -> None:
        """dst = (a <op0> c0) <op1> b with c0 a scalar and b a tile, on VectorE."""
        nisa.scalar_tensor_tensor(
            dst=dst, data=a, op0=op0, operand0=c0, op1=op1, operand1=b, reverse0=rev0, reverse1=rev1
        )

    def act(self, dst: Any, fn: Any, a: Any, scale: float = 1.0, bias: float = 0.0) -> None:
        """dst = fn(a * scale + bias) on ScalarE (a non-zero bias as a (P, 1) const tile)."""
        b = self.const(bias) if bias else None
        nisa.activation(dst=dst, op=fn, data=a, scale=float(scale), bias=b)

    def affine(self, dst: Any, a: Any, mul: float = 1.0, add: float = 0.0) -> None:
        """dst = a * mul + add (two fp32 roundings), on VectorE and ScalarE by turns."""
        if self.turns.next("affine", (VECTOR, SCALAR)) == VECTOR:
            self.ts(dst, a, nl.multiply, float(mul), nl.add, float(add))
        else:
            self.act(dst, nl.copy, a, scale=mul, bias=add)

    def copy(self, dst: Any, src: Any, engine: Any = None) -> None:
        """dst = src with a cast (bit-exact for equal dtypes on VectorE/GpSimd), by turns."""
        if engine is None:
            engine = self.turns.next("copy", (VECTOR, GPSIMD, SCALAR))
            if engine == SCALAR and src.dtype == dst.dtype and not src.dtype.is_float:
                engine = VECTOR  # ScalarE copies go through fp32: not bit-exact for int32
        if engine == SCALAR and self.nc < 3:
            nisa.activation(dst=dst, op=nl.copy, data=src)  # NC-v2 ScalarE has no tensor_copy
        else:
            nisa.tensor_copy(dst=dst, src=src, engine=engine)

    def binop(self, dst: Any, a: Any, b: Any, op: Any) -> None:
        """dst = a <op> b where either may be a Python scalar (then tensor_scalar)."""
        if is_tile(a) and is_tile(b):
            self.tt(dst, a, b, op)
        elif is_tile(a):
            self.ts(dst, a, op, float(b))
        elif is_tile(b):
            self.ts(dst, b, op, float(a), rev0=True)
        else:
            fail(f"pointwise: operands {a!r} and {b!r} are both scalars; pass a tensor")

    def pred(self, a: Any, op: Any, c: float, op0: Any = None) -> Any:
        """A uint8 predicate tile (a <op> c), optionally (op0(a) <op> c) for a unary op0."""
        p = self.tmp(U8, "pw_pred")
        if op0 is None:
            self.ts(p, a, op, float(c))
        else:
            self.ts(p, a, op0, None, op, float(c))
        return p

    def select(self, dst: Any, pred: Any, on_true: Any, on_false: float) -> None:
        """dst = pred ? on_true : on_false (a scalar), one VectorE select_reduce."""
        nisa.select_reduce(dst=dst, predicate=pred, on_true=on_true, on_false=float(on_false))

    def overwrite(self, dst: Any, pred: Any, src: Any) -> None:
        """dst = src where pred (dst unchanged elsewhere); src a tile of dst's dtype or a
        scalar (VectorE tensor_copy_predicated)."""
        if not is_tile(src):
            src = float(src) if dst.dtype.is_float else int(src)
        nisa.tensor_copy_predicated(dst=dst, src=src, predicate=pred)
