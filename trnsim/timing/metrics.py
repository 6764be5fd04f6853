"""Profile metrics as Neuron's profiler defines them: FLOPs, active time, MFU/HFU/MBU, usage.

Definitions (trainium-hw.md D.3, NX-SUMMARY, NX-SCHEMA): active time is the union of an engine's
instruction intervals; instruction time is their plain sum; FLOPs count a MAC as 2; MFU and HFU
are against the BF16 TensorE peak of the cores used; MBU is HBM bytes against the HBM bandwidth
share of those cores. Knows nothing about values.
"""

from __future__ import annotations

from collections.abc import Iterable

from trnsim.program import Instruction
from trnsim.timing.models import attr

TENSOR_OPS = frozenset({"nc_matmul", "nc_matmul_mx", "nc_transpose"})
# BF16-adjusted FLOPs (NX-SCHEMA): FP32 work x4, FP8 x0.5 on NC-v3/v4 (x1 on NC-v2), MX x0.25.
_ADJUST = {
    "float32": 4.0,
    "float8_e4m3": 0.5,
    "float8_e5m2": 0.5,
    "float8_e4m3fn": 0.5,
    "float8_e4m3fn_x4": 0.25,
    "float8_e5m2_x4": 0.25,
    "float4_e2m1fn_x4": 0.25,
}


def matmul_flops(ins: Instruction) -> int:
    """2 x K x M x N of one TensorE instruction (a transpose counts as an identity matmul)."""
    named = {o.name: o for o in ins.reads}
    if ins.opcode == "nc_transpose":
        data = named.get("data") or (ins.reads[0] if ins.reads else None)
        if data is None:
            return 0
        return 2 * data.partitions * data.elems_per_partition * data.partitions
    stat, mov = named.get("stationary"), named.get("moving")
    if stat is None or mov is None:
        return 0
    k = stat.partitions
    m, n = stat.elems_per_partition, mov.elems_per_partition
    packed = 4 if ins.opcode == "nc_matmul_mx" else 1  # x4 dtypes pack 4 values along K
    if attr(ins, "perf_mode") == "double_row":
        return 2 * k * 2 * (m // 2) * (n // 2)
    return 2 * k * packed * m * n


def is_transpose(ins: Instruction) -> bool:
    return ins.opcode == "nc_transpose" or bool(attr(ins, "is_transpose"))


def flops_adjustment(ins: Instruction, nc_version: int) -> float:
    """Factor from raw to BF16-equivalent FLOPs for one TensorE instruction."""
    dtypes = [o.dtype for o in ins.reads if o.name in ("stationary", "moving", "data")]
    factor = max((_ADJUST.get(d, 1.0) for d in dtypes), default=1.0)
    if nc_version <= 2 and factor == 0.5:
        return 1.0
    return factor


def union_length(intervals: Iterable[tuple[float, float]]) -> float:
    """Total length covered by a set of [start, end) intervals."""
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def live_regions(program: list[Instruction], start: list[float], end: list[float], space: str,
                 core: int) -> dict[tuple[int, int], list[float]]:
    """(byte_start, byte_end) -> [first access start, last access end] of each region of
    `space` on `core`: how long the compiler's allocator must keep it."""
    live: dict[tuple[int, int], list[float]] = {}
    for ins in program:
        if ins.core != core:
            continue
        for o in ins.operands:
            r = o.region
            if r.space != space:
                continue
            key = (r.byte_start, r.byte_end)
            span = live.get(key)
            if span is None:
                live[key] = [start[ins.index], end[ins.index]]
            else:
                span[0] = min(span[0], start[ins.index])
                span[1] = max(span[1], end[ins.index])
    return live


def usage_samples(
    program: list[Instruction],
    start: list[float],
    end: list[float],
    space: str,
    core: int,
    max_points: int = 4000,
) -> list[tuple[float, int]]:
    """Bytes per partition of `space` held over time: a region is live from its first access's
    start to its last access's end (the footprint the compiler's allocator must provide)."""
    live = live_regions(program, start, end, space, core)
    events = sorted(
        [(s, 1, k) for k, (s, _) in live.items()] + [(e, -1, k) for k, (_, e) in live.items()],
        key=lambda x: (x[0], -x[1]),
    )
    cur: dict[tuple[int, int], int] = {}
    out: list[tuple[float, int]] = []
    step = max(1, len(events) // max_points)
    for n, (t, d, k) in enumerate(events):
        cur[k] = cur.get(k, 0) + d
        if cur[k] == 0:
            del cur[k]
        if n % step == 0 or n == len(events) - 1:
            out.append((t, int(union_length(cur))))
    return out


def psum_bank_usage(program: list[Instruction], start: list[float], end: list[float],
                    core: int, bank_bytes: int) -> dict[int, list[tuple[float, float]]]:
    """Bytes per partition live in each PSUM bank over time (first to last access)."""
    per_bank: dict[int, dict[float, float]] = {}
    for (b0, b1), (t0, t1) in live_regions(program, start, end, "psum", core).items():
        for bank in range(b0 // bank_bytes, (b1 - 1) // bank_bytes + 1):
            n = min(b1, (bank + 1) * bank_bytes) - max(b0, bank * bank_bytes)
            d = per_bank.setdefault(bank, {})
            d[t0] = d.get(t0, 0.0) + n
            d[t1] = d.get(t1, 0.0) - n
    return {bank: step_series(d) for bank, d in sorted(per_bank.items())}


def step_series(deltas: dict[float, float], scale: float = 1.0, time_scale: float = 1.0,
                max_points: int = 4000) -> list[tuple[float, float]]:
    """A step function from value changes at given times (thinned to about max_points)."""
    out, cur = [(0.0, 0.0)], 0.0
    times = sorted(deltas)
    step = max(1, len(times) // max_points)
    for n, t in enumerate(times):
        cur += deltas[t]
        if n % step == 0 or n == len(times) - 1:
            out.append((t / time_scale, max(0.0, cur) * scale))
    return out


def rate_series(spans: Iterable[tuple[float, float, float]]) -> list[tuple[float, float]]:
    """Throughput over time from (start, end, amount) spans, each spread evenly over its span."""
    deltas: dict[float, float] = {}
    for t0, t1, amount in spans:
        if t1 > t0 and amount:
            r = amount / (t1 - t0)
            deltas[t0] = deltas.get(t0, 0.0) + r
            deltas[t1] = deltas.get(t1, 0.0) - r
    return step_series(deltas)


def busy_fraction(spans: Iterable[tuple[float, float]], total: float, window: float
                  ) -> list[tuple[float, float]]:
    """Fraction of each `window` of [0, total) covered by the union of `spans`."""
    merged: list[tuple[float, float]] = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    if not merged:
        return []
    n = int(total // window) + 1
    busy = [0.0] * n
    for a, b in merged:
        w = int(a // window)
        while w < n and w * window < b:
            busy[w] += max(0.0, min(b, (w + 1) * window) - max(a, w * window))
            w += 1
    return [(w * window, busy[w] / window) for w in range(n)] + [(n * window, 0.0)]


def hbm_throughput(
    chunks: list, ticks_per_ns: float, max_points: int = 4000
) -> list[tuple[float, float]]:
    """HBM GB/s over time from DMA chunks (each streams its bytes evenly over its data phase)."""
    deltas: dict[int, float] = {}
    for c in chunks:
        if c.hbm_weight and c.end > c.stream_start >= 0:
            r = c.nbytes * c.hbm_weight / (c.end - c.stream_start)
            deltas[c.stream_start] = deltas.get(c.stream_start, 0.0) + r
            deltas[c.end] = deltas.get(c.end, 0.0) - r
    return step_series(deltas, scale=ticks_per_ns, time_scale=ticks_per_ns,
                       max_points=max_points)
