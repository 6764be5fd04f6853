"""gemm's arguments: checks, batch broadcasting and the batch of 2-D problems they describe.

Layer: kernel library; public NKI API only.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

from ._common import fail
from ._kmajor import Mat

DTYPES = ("float32", "bfloat16", "float16")


@dataclass(frozen=True)
class Problem:
    """One 2-D product out[M, N] = epilogue(a_t.T @ b) of the batch."""

    out: Mat  # [M, N]
    a_t: Mat  # [K, M]: a transposed, the stationary side
    b: Mat  # [K, N]: the moving side
    c: Mat | None  # [M, N] (stride 0 where broadcast) or None


def plan(out, a, b, c, alpha, beta) -> tuple[list[Problem], int, Any]:
    """The batch of 2-D problems of a valid call; fail() naming the bad operand otherwise."""
    for name, t in (("out", out), ("a", a), ("b", b)):
        if len(t.shape) < 2:
            fail(f"gemm: {name} must have at least 2 dims [..., rows, cols], got {list(t.shape)}")
    m, n = (int(s) for s in out.shape[-2:])
    ma, ka = (int(s) for s in a.shape[-2:])
    kb, nb = (int(s) for s in b.shape[-2:])
    if ma != m or nb != n or ka != kb:
        fail(
            f"gemm: shapes do not chain: out {list(out.shape)}, a {list(a.shape)}, "
            f"b {list(b.shape)}; need out [..., M, N], a [..., M, K], b [..., K, N]"
        )
    for name, t in (("out", out), ("a", a), ("b", b), ("c", c)):
        if t is not None and t.dtype.name not in DTYPES:
            fail(f"gemm: {name} has dtype {t.dtype.name}; allowed: {', '.join(DTYPES)}")
    if a.dtype != b.dtype:
        fail(
            f"gemm: a is {a.dtype.name} and b is {b.dtype.name}; both operands must have the "
            f"same dtype (the Tensor Engine pairs float32 only with float32)"
        )
    for name, v in (("alpha", alpha), ("beta", beta)):
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
            fail(f"gemm: {name}={v!r} must be a finite Python number (a trace-time constant)")
    batch = tuple(int(s) for s in out.shape[:-2])
    a_b = _batch_strides("a", a, batch, 2)
    b_b = _batch_strides("b", b, batch, 2)
    c_info = None if c is None or beta == 0 else _c_view(c, out.shape)
    problems = []
    for idx in itertools.product(*(range(s) for s in batch)):
        o_off = int(out.offset) + _dot(idx, [int(s) for s in out.strides[:-2]])
        a_off = int(a.offset) + _dot(idx, a_b)
        b_off = int(b.offset) + _dot(idx, b_b)
        om = Mat(out, m, n, int(out.strides[-2]), int(out.strides[-1]), o_off)
        am = Mat(a, m, ka, int(a.strides[-2]), int(a.strides[-1]), a_off)
        bm = Mat(b, kb, n, int(b.strides[-2]), int(b.strides[-1]), b_off)
        cm = None
        if c_info is not None:
            cb, (crs, ccs) = c_info
            cm = Mat(c, m, n, crs, ccs, int(c.offset) + _dot(idx, cb))
        problems.append(_oriented(om, am, bm, cm))
    return problems, ka, a.dtype


def _dot(idx, strides) -> int:
    return sum(i * s for i, s in zip(idx, strides, strict=True))


def _batch_strides(name: str, t, batch: tuple[int, ...], core: int) -> list[int]:
    """Element strides of t's batch dims aligned to `batch` (0 where t broadcasts)."""
    lead = [int(s) for s in t.shape[:-core]]
    strides = [int(s) for s in t.strides[:-core]]
    if len(lead) > len(batch):
        fail(f"gemm: {name} has batch dims {lead} but out has only {list(batch)}")
    pad = len(batch) - len(lead)
    out = [0] * pad
    for d, (size, st) in enumerate(zip(lead, strides, strict=True)):
        want = batch[pad + d]
        if size not in (1, want):
            fail(
                f"gemm: {name} batch dim {d} has size {size}; out's is {want} (broadcasting "
                f"needs equal sizes or 1)"
            )
        out.append(0 if size == 1 else st)
    return out


def _c_view(c, out_shape) -> tuple[list[int], tuple[int, int]]:
    """(batch strides, (row stride, col stride)) of c broadcast to out's shape."""
    shape, strides = [int(s) for s in c.shape], [int(s) for s in c.strides]
    if len(shape) > len(out_shape):
        fail(f"gemm: c has shape {shape}, more dims than out {list(out_shape)}")
    pad = len(out_shape) - len(shape)
    full = [1] * pad + shape
    st = [0] * pad + strides
    for d, (size, want) in enumerate(zip(full, out_shape, strict=True)):
        if size not in (1, int(want)):
            fail(
                f"gemm: c of shape {shape} does not broadcast to out {list(out_shape)} "
                f"(dim {d - pad}: {size} vs {int(want)})"
            )
    eff = [0 if size == 1 else s for size, s in zip(full, st, strict=True)]
    return eff[:-2], (eff[-2], eff[-1])


def _oriented(out: Mat, a: Mat, b: Mat, c: Mat | None) -> Problem:
    """The problem with contiguous output rows: a column-major out is computed transposed
    (out^T = b^T a^T), so each partition stores a contiguous run."""
    if out.rows > 1 and out.cols > 1 and out.rs == 1 and out.cs != 1:
        return Problem(out.T, b, a.T, None if c is None else c.T)
    return Problem(out, a.T, b, c)
