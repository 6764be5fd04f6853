"""Copies and casts between any two device layouts and dtypes (pointwise op "copy"): what
.contiguous(), .to(dtype) and copy_ need.

Layer: kernel library (trnsim.kernels); NKI API only.

Where the DMA's own conversion is PyTorch's (same dtype; any -> float, which the DMA does through
fp32 with round-to-nearest-even; bool -> anything; widening integers; int64 -> int32, the low
words), each tile is one HBM -> HBM dma_copy and nothing else. The other conversions go through
SBUF: float -> integer rounds towards zero (PyTorch's cast; the hardware conversion rounds to
nearest), narrowing integers keep the low bits (PyTorch wraps, the DMA would saturate),
anything -> bool is x != 0, and int64 results get their sign-extended high words. An int32 ->
bfloat16 cast rounds twice (through fp32), so it may differ from PyTorch by one bf16 ulp above
2^24; int64 values are assumed to lie in int32 range (device-kernels.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

from . import _int64 as I64
from . import _tiles as T
from ._common import fail
from ._cores import share
from ._pw_math import trunc_to_int
from ._pw_tile import ConstPool, TileOps, Turns

FLOATS = ("float32", "bfloat16", "float16")
DTYPES = (*FLOATS, "int32", "int16", "int8", "uint8", "bool", "int64")
_WIDENS = {
    ("int8", "int16"),
    ("int8", "int32"),
    ("uint8", "int16"),
    ("uint8", "int32"),
    ("int16", "int32"),
}
DMA_MAX_FREE = 16384  # elements per partition per HBM -> HBM DMA (no SBUF involved)
_SBUF_BYTES = 24  # per element: source, int32 and fp32 scratch, output


@dataclass
class CopyJob:
    out_dtype: str
    src_dtype: str
    direct: bool
    operands: list
    loads: list
    tiles: list


def _dtype(t: Any, pair: bool, what: str) -> str:
    name = "int64" if pair else t.dtype.name
    if name not in DTYPES:
        fail(f"{what}: dtype {t.dtype.name} is not supported (supported: {', '.join(DTYPES)})")
    return name


def _is_direct(s: str, d: str) -> bool:
    return (
        s == d
        or d in FLOATS
        or (s == "bool" and d != "int64")
        or (s, d) in _WIDENS
        or (s, d) == ("int64", "int32")
    )


def copy_job(out: Any, inputs: list, attrs: dict, int64: Any, what: str) -> CopyJob:
    """Plan one copy (out = inputs[0] cast to out's dtype), broadcasting the source."""
    if len(inputs) != 1 or attrs:
        fail(
            f"{what}: copy takes one tensor input and no attributes, got {len(inputs)} "
            f"input(s) and {sorted(attrs)}"
        )
    src = inputs[0]
    items = (
        []
        if int64 in (None, False)
        else ([int64] if isinstance(int64, (str, int)) else list(int64))
    )
    out_pair = any(i in (0, "out") for i in items)
    src_pair = any(i in (1, "input") for i in items)
    d, s = _dtype(out, out_pair, f"{what}: out"), _dtype(src, src_pair, f"{what}: input")
    shape = I64.element_shape(out) if out_pair else tuple(out.shape)
    direct = _is_direct(s, d)
    out_op = (
        T.pair_operand(out, shape, f"{what}: out")
        if out_pair
        else T.operand(out, shape, f"{what}: out")
    )
    if src_pair and not (direct and s == d):
        # the low words as a plain int32 view (a DMA reads them directly) or a pair load
        src_op = (
            T.operand(src.select(len(src.shape) - 1, 0), shape, f"{what}: input")
            if direct
            else T.pair_operand(src, shape, f"{what}: input")
        )
    else:
        src_op = (
            T.pair_operand(src, shape, f"{what}: input")
            if src_pair
            else T.operand(src, shape, f"{what}: input")
        )
    ops = [out_op, src_op]
    if direct:
        return CopyJob(d, s, True, ops, [], T.plan(shape, ops, DMA_MAX_FREE))
    load_int = s not in FLOATS and s not in ("int32", "int64") and d != "bool"
    loads = [T.Load(1, nl.int32 if load_int else None)]
    return CopyJob(d, s, False, ops, loads, T.plan(shape, ops, T.free_budget(_SBUF_BYTES)))


def _convert(k: TileOps, job: CopyJob, x: Any, shape: tuple) -> Any:
    """The output tile (SBUF) of one tile's conversion."""
    d, s = job.out_dtype, job.src_dtype
    if d == "bool":
        res = k.tmp(nl.bool_, "copy_out")
        k.ts(res, x, nl.not_equal, 0.0)
        return res
    if d == "int64":
        res = I64.pair_tile(shape, "copy_i64")
        if s in FLOATS:
            trunc_to_int(k, I64.low_word(res), x)
        else:
            k.copy(I64.low_word(res), x)
        I64.sign_extend(res)
        return res
    res = k.tmp(getattr(nl, d), "copy_out")
    if s in FLOATS:
        if d == "int32":
            trunc_to_int(k, res, x)
            return res
        wide = k.tmp(nl.int32, "copy_i32")
        trunc_to_int(k, wide, x)
        x = wide
    if d == "int32":
        k.copy(res, x)
    else:
        k.ts(res, x, nl.bitwise_or, 0)  # low bits: PyTorch's wrapping integer narrowing
    return res


def run_copy(jobs: list[CopyJob]) -> None:
    """Every tile of every copy: direct HBM -> HBM DMAs, or through SBUF, prefetched (this
    core's share of the tiles on kernel[2])."""
    for job in jobs:
        if job.direct:
            for tile in share(job.tiles):
                nisa.dma_copy(dst=tile.hbm(job.operands[0], 0), src=tile.hbm(job.operands[1], 1))
    work = share([
        T.Work(job, t, job.operands, job.loads) for job in jobs if not job.direct for t in job.tiles
    ])
    pool, turns = ConstPool(), Turns()
    for w, (x,) in T.prefetched_work(work, "copy_in"):
        job = w.tag
        k = TileOps(w.tile.shape, pool, turns, job.out_dtype)
        if job.operands[1].pair:
            x = I64.low_word(x)
        T.store(w.tile, job.operands[0], 0, _convert(k, job, x, w.tile.shape))
