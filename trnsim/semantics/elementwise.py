"""Semantics of element-wise Vector/GpSimd instructions. Pure numpy; knows nothing about time."""

from __future__ import annotations

import numpy as np

from trnsim import dtypes as dt
from trnsim.memory import View
from trnsim.semantics import _ops, engine_rule, semantics


def _operand_values(v: View, bitvec: bool) -> np.ndarray:
    """Engine view of an input: fp32 for arithmetic, raw integers for bitvec ops."""
    return v.read() if bitvec else v.read_f32()


def _int_exact(*views: View) -> bool:
    return all(v.dtype.name in ("int32", "uint32") for v in views)


@engine_rule("tensor_tensor")
def _tensor_tensor_engine(chip, operands, attrs):
    views = [operands.get(k) for k in ("dst", "data1", "data2")]
    views = [v for v in views if v is not None and hasattr(v, "buffer")]
    if _ops.op_name(attrs.get("op")) == "power":
        return "gpsimd"
    # All-int32 operands run on GpSimd (exact integer math) unless PSUM is involved.
    if views and _int_exact(*views) and all(v.buffer.space == "sbuf" for v in views):
        return "gpsimd"
    return None


@semantics("tensor_tensor")
def tensor_tensor(core, *, engine: str, dst: View, data1: View, data2: View, op) -> None:
    name = _ops.op_name(op)
    bitvec = _ops.is_bitvec(name)
    a = _operand_values(data1, bitvec).reshape(dst.shape)
    b = _operand_values(data2, bitvec).reshape(dst.shape)
    if engine == "gpsimd" and _int_exact(data1, data2, dst) and name in ("add", "subtract",
                                                                          "multiply"):
        # GpSimd has native 32-bit integer arithmetic (wrapping).
        x, y = data1.read().astype(np.int64), data2.read().astype(np.int64)
        res = {"add": x + y, "subtract": x - y, "multiply": x * y}[name]
        dst.write_raw(res.astype(dst.dtype.storage).reshape(dst.shape))
        return
    dst.write(_ops.apply_binary(name, a, b))


@semantics("memset")
def memset(core, *, engine: str, dst: View, value) -> None:
    dst.write(np.full(dst.shape, value, dtype=np.float64 if dst.dtype.kind != "float"
                      else np.float32))


@semantics("tensor_copy")
def tensor_copy(core, *, engine: str, dst: View, src: View) -> None:
    if src.dtype == dst.dtype and engine != "scalar":
        dst.write_raw(src.read().reshape(dst.shape))  # bit-exact on Vector/GpSimd
    else:
        dst.write(dt.to_float32(src.read()).reshape(dst.shape))
