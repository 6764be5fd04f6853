"""Reports on a Profile: its timeline as a Trace, an Explorer-style summary with insights, diffs.

Names follow Neuron's profiler (trainium-hw.md §D): rows `Sync(nc0)`,
`Tensor(nc0)` (LoadStationary), `TensorMatrix(nc0)` (MultiplyMoving), `Vector(nc0)`,
`Scalar(nc0)`, `GpSimd(nc0)`, DMA queues
(`qSyncIO(nc0)`) or DMA engines (`DMA-E3(nc0)`); metrics `total_time`,
`<engine>_active_time_percent`, `mfu_estimated_percent`, `average_dma_size`, ...
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trnsim import trace_files
from trnsim.program import Instruction
from trnsim.timing.profile import Profile
from trnsim.timing.races import find_races
from trnsim.trace import Counter, Slice, Trace

ROW_NAMES = {"sync": "Sync", "tensor": "Tensor", "tensor_matrix": "TensorMatrix",
             "vector": "Vector", "scalar": "Scalar", "gpsimd": "GpSimd"}
ROW_ORDER = ("sync", "tensor", "tensor_matrix", "vector", "scalar", "gpsimd")
SUMMARY_ROWS = {"tensor": "tensor", "tensor_matrix": "tensor_matrix", "vector": "vector",
                "scalar": "scalar", "gpsimd": "gpsimd", "sync": "sync"}

# Profiler opcode names (the ISA mnemonics the profiler shows), by NKI instruction.
OPCODES = {
    "nc_matmul": "MATMUL", "nc_matmul_mx": "MATMUL_MX", "nc_transpose": "TRANSPOSE",
    "activation": "ACTIVATE", "activation_reduce": "ACTIVATE", "activate2": "ACTIVATE2",
    "tensor_tensor": "TENSOR_TENSOR", "tensor_scalar": "TENSOR_SCALAR_PTR",
    "tensor_reduce": "TENSOR_REDUCE", "tensor_copy": "TENSOR_COPY", "memset": "MEMSET",
    "iota": "IOTA", "dma_copy": "DMA_TRIGGER", "dma_transpose": "DMA_TRIGGER",
}
CATEGORIES = {
    "nc_matmul": "matmul", "nc_matmul_mx": "matmul", "nc_transpose": "transpose",
    "activation": "activation", "activation_reduce": "activation", "activate2": "activation",
    "exponential": "activation", "tensor_tensor": "elementwise", "tensor_scalar": "elementwise",
    "scalar_tensor_tensor": "elementwise", "tensor_tensor_scan": "elementwise",
    "reciprocal": "elementwise", "tensor_reduce": "reduce", "tensor_scalar_reduce": "reduce",
    "tensor_partition_reduce": "reduce", "max8": "reduce", "tensor_copy": "copy",
    "tensor_copy_predicated": "copy", "memset": "copy", "bn_stats": "stats", "bn_aggr": "stats",
    "dma_copy": "dma", "dma_transpose": "dma_transpose", "dma_compute": "dma",
    "affine_select": "select", "range_select": "select", "select_reduce": "select",
}
SMALL_DMA_BYTES = 32 * 1024  # Explorer flags an average DMA size below 32 KiB (NX-GLOSS)
SMALL_DMA_PER_PARTITION = 2048  # < 2 KiB per partition underperforms (NKI-DMA-BW)


def _category(ins: Instruction) -> str:
    if ins.opcode == "nc_matmul" and ins.attrs.get("is_transpose"):
        return "transpose"
    return CATEGORIES.get(ins.opcode, "gpsimd" if ins.engine == "gpsimd" else
                          "control" if ins.engine == "sync" else ins.engine)


def operand_string(o: Any) -> str:
    """`dtype@space[p0:p1][shape]` as the profiler shows operands."""
    r = o.region
    part = f"[{r.partition_start}:{r.partition_start + r.partitions}]" if r.space != "hbm" else ""
    return f"{o.dtype}@{r.space}{part}{list(o.shape)}"


def _source(ins: Instruction) -> tuple[str, int, str] | None:
    if ins.loc is None:
        return None
    return (ins.loc.filename, ins.loc.lineno, ins.loc.function)


# ---------------------------------------------------------------- Profile -> Trace
def to_trace(profile: Profile, kernel: str = "", dma_rows: str = "queue",
             offset_ns: float = 0.0, id_base: int = 0) -> Trace:
    """The profile's timeline: engine rows per core, DMA rows per queue (or per DMA engine),
    dependency flows, counters (SBUF/PSUM usage, pending DMAs, HBM throughput, throttle)."""
    if dma_rows not in ("queue", "engine"):
        raise ValueError(f"dma_rows={dma_rows!r}: use 'queue' or 'engine'")
    kernel = kernel or getattr(profile, "kernel_name", "")
    prog = profile.program
    slices: list[Slice] = []
    last_slice_of: dict[int, int] = {}
    next_id = id_base

    def new_id() -> int:
        nonlocal next_id
        next_id += 1
        return next_id

    dma_tracks: set[tuple[int, str]] = set()
    for t in sorted(profile.dma_transfers, key=lambda t: (t.start_ns, t.index, t.engine)):
        ins = prog[t.index]
        row = t.queue if dma_rows == "queue" else f"DMA-E{t.engine}"
        track = f"{row}(nc{t.core})"
        dma_tracks.add((t.core, row))
        sid = new_id()
        slices.append(Slice(sid, track, ins.name or ins.opcode, offset_ns + t.start_ns,
                            offset_ns + t.end_ns, _category(ins),
                            {"bytes": t.nbytes, "descriptors": t.descriptors,
                             "dma_engine": t.engine, "queue": t.queue, "pc": t.index,
                             "variable": ",".join(o.tensor_name for o in ins.operands)},
                            _source(ins)))
        last_slice_of[t.index] = sid
    events = sorted(profile.events, key=lambda e: (e.start_ns, e.index))
    pending: list[tuple[Any, int]] = []
    for ev in events:
        ins = prog[ev.index]
        sid = new_id()
        pending.append((ev, sid))
        if ev.kind != "DmaTrigger" or ev.index not in last_slice_of:
            last_slice_of[ev.index] = sid
    for ev, sid in pending:
        ins = prog[ev.index]
        name = {"LoadStationary": "LDWEIGHTS", "MultiplyMoving": "MATMUL",
                "DmaTrigger": "DMA_TRIGGER", "ActTableLoad": "ACT_TABLE_LOAD"}.get(ev.kind) \
            or OPCODES.get(ins.opcode, ins.opcode.upper())
        args: dict[str, Any] = {
            "pc": ev.index, "opcode": ins.opcode, "engine": ins.engine,
            "wait_ns": round(ev.wait_ns, 3),
            "operands": " ".join(f"{o.name}={operand_string(o)}" for o in ins.operands),
            "bytes": sum(o.nbytes for o in ins.operands),
        }
        if ins.name:
            args["name"] = ins.name
        for k in ("op", "op0", "op1", "perf_mode", "dge_mode"):
            if ins.attrs.get(k) not in (None, "none"):
                args[k] = str(ins.attrs[k])
        flows = ()
        if ev.producer >= 0 and ev.producer in last_slice_of and ev.kind != "MultiplyMoving":
            flows = (last_slice_of[ev.producer],)
            args["producer_pc"] = ev.producer
        row = ev.row
        track = f"{ROW_NAMES.get(row, row)}(nc{ev.core})"
        if row not in ROW_NAMES:  # a DMA trigger row (issuing queue)
            dma_tracks.add((ev.core, row))
        slices.append(Slice(sid, track, name, offset_ns + ev.start_ns, offset_ns + ev.end_ns,
                            _category(ins), args, _source(ins), flows))
    tracks: list[tuple[str, str]] = []
    for core in profile.cores:
        for core_q, row in sorted(dma_tracks):
            if core_q == core:
                tracks.append((f"{row}(nc{core})", f"nc{core}"))
        for row in ROW_ORDER:
            tracks.append((f"{ROW_NAMES[row]}(nc{core})", f"nc{core}"))
    counters = _counters(profile, offset_ns)
    meta = {"chip": profile.chip.name, "kernel": kernel, "instructions": len(prog),
            "total_time_us": profile.latency_ns / 1000.0, "dma_rows": dma_rows}
    return Trace(tracks, slices, counters, meta)


# Profile counter keys -> (track name, unit); per-core keys end in "[core]".
_COUNTERS = {
    "pending_dma": ("Pending DMA count", "transfers"),
    "hbm_throughput": ("HBM throughput", "GB/s"),
    "dma_throughput": ("DMA throughput", "GB/s"),
    "sbuf_usage": ("SBUF usage", "bytes/partition"),
    "psum_usage": ("PSUM usage", "bytes/partition"),
    "throttle": ("TensorE throttle", "utilization cap"),
    "tensor_utilization": ("TensorE utilization", "fraction busy"),
}


def _counters(profile: Profile, offset_ns: float) -> list[Counter]:
    out = []
    for key, points in profile.counters.items():
        if not points:
            continue
        base, _, core = key.partition("[")
        if base.startswith("psum_bank"):
            name, unit = f"PSUM bank{base[9:].removesuffix('_usage')} usage", "bytes/partition"
        else:
            name, unit = _COUNTERS.get(base, (base, ""))
        group = ""
        if core:
            core = core.rstrip("]")
            name, group = f"{name}(nc{core})", f"nc{core}"
        out.append(Counter(name, unit, tuple((offset_ns + t, v) for t, v in points), group))
    return out


# ---------------------------------------------------------------- summary
@dataclass
class LineStat:
    location: str
    code: str
    instructions: int
    time_ns: float


def line_stats(profile: Profile) -> list[LineStat]:
    """Instruction time per kernel source line, largest first."""
    acc: dict[str, LineStat] = {}
    # Engine instructions count their bar; a DMA counts trigger to last byte landed, once
    # (its packets run in parallel on up to 16 DMA engines).
    for ev in profile.events:
        ins = profile.program[ev.index]
        if ins.loc is None:
            continue
        key = f"{os.path.basename(ins.loc.filename)}:{ins.loc.lineno}"
        st = acc.setdefault(key, LineStat(key, ins.loc.code, 0, 0.0))
        if ev.kind == "DmaTrigger":
            st.instructions += 1
            st.time_ns += profile.end_ns(ev.index) - profile.start_ns(ev.index)
            continue
        st.instructions += 1 if ev.kind not in ("LoadStationary", "ActTableLoad") else 0
        st.time_ns += ev.end_ns - ev.start_ns
    return sorted(acc.values(), key=lambda s: -s.time_ns)


def summary(profile: Profile, kernel: str = "") -> dict[str, Any]:
    """Explorer-style metrics (trainium-hw.md §D.3) plus per-engine and per-line breakdowns."""
    s = dict(profile.summary())
    kernel = kernel or getattr(profile, "kernel_name", "")
    lat = profile.latency_ns
    s["kernel"] = kernel
    s["chip"] = profile.chip.name
    s["total_time_us"] = lat / 1000.0
    for row in ROW_ORDER:
        ns = sum(v for (c, r), v in profile.engine_active_ns.items() if r == row)
        cnt = sum(v for (c, r), v in profile.instruction_counts.items() if r == row)
        per_core = ns / max(1, len(profile.cores))
        s[f"{row}_active_time_percent"] = 100.0 * per_core / lat if lat else 0.0
        s[f"{row}_instruction_count"] = cnt
    dma_busy = _dma_active_ns(profile)
    s["dma_active_time_percent"] = 100.0 * dma_busy / lat if lat else 0.0
    s["dma_transfer_count"] = len(profile.dma_transfers)
    s["peak_sbuf_usage_bytes"] = _peak(profile, "sbuf_usage")
    s["peak_psum_usage_bytes"] = _peak(profile, "psum_usage")
    # Host RAM behind the simulated memories (0: not measured, e.g. timed from a record).
    s["host_peak_resident_bytes"] = int(getattr(profile, "host_peak_resident_bytes", 0))
    s["top_lines"] = [{"location": ls.location, "code": ls.code, "time_ns": round(ls.time_ns, 1),
                       "instructions": ls.instructions} for ls in line_stats(profile)[:10]]
    s["insights"] = insights(profile, s)
    return s


def _peak(profile: Profile, key: str) -> float:
    vals = [v for k, pts in profile.counters.items() if k.startswith(key) for _, v in pts]
    return max(vals, default=0.0)


def _dma_active_ns(profile: Profile) -> float:
    from trnsim.timing.metrics import union_length

    return union_length((t.start_ns, t.end_ns) for t in profile.dma_transfers)


def insights(profile: Profile, s: dict[str, Any]) -> list[str]:
    """Plain-words findings: what bounds the kernel and what to look at."""
    out = []
    engines = {r: s.get(f"{r}_active_time_percent", 0.0) for r in ROW_ORDER}
    busiest = max(engines, key=engines.get)
    dma = s["dma_active_time_percent"]
    if dma >= max(engines.values()) and dma > 50:
        if s.get("mbu_estimated_percent", 0) >= 60:
            out.append(f"HBM-bound: DMA is active {dma:.0f}% of the time at "
                       f"{s['mbu_estimated_percent']:.0f}% of HBM bandwidth.")
        else:
            out.append(f"DMA-bound: DMA queues are active {dma:.0f}% of the time but reach only "
                       f"{s.get('mbu_estimated_percent', 0):.0f}% of HBM bandwidth; larger or "
                       "more parallel transfers would help.")
    elif engines[busiest] > 50:
        out.append(f"{ROW_NAMES[busiest]}-bound: the {ROW_NAMES[busiest]} engine is active "
                   f"{engines[busiest]:.0f}% of the time.")
    else:
        out.append("Latency-bound: no engine or DMA queue is busy more than half of the time; "
                   "look for serial dependencies (semaphore waits) between engines.")
    avg = s.get("average_dma_size", 0)
    if profile.dma_count and avg < SMALL_DMA_BYTES:
        out.append(f"Small DMAs: the average DMA moves {avg / 1024:.1f} KiB (< 32 KiB); "
                   f"aim for >= {SMALL_DMA_PER_PARTITION // 1024} KiB per partition.")
    mm = engines.get("tensor_matrix", 0.0)
    if profile.hardware_flops and mm < 50:
        out.append(f"TensorE idle: the matrix engine is active only {mm:.0f}% of the time "
                   f"(MFU {s.get('mfu_estimated_percent', 0):.1f}%).")
    throttled = [k for k, pts in profile.counters.items()
                 if k.startswith("throttle") and any(v < 0.99 for _, v in pts)]
    if throttled and profile.hardware_flops:
        out.append("TensorE throttled: the utilization cap was below 100% for part of the "
                   "kernel (ramp-up after start or after idle windows).")
    tf = profile.transpose_flops
    if profile.hardware_flops and tf > 0.1 * profile.hardware_flops:
        out.append(f"Transposes take {100 * tf / profile.hardware_flops:.0f}% of TensorE "
                   "FLOPs: prefer layouts that avoid them.")
    sbuf_cap = profile.chip.sbuf.bytes_per_partition
    if s["peak_sbuf_usage_bytes"] > 0.9 * sbuf_cap:
        out.append(f"SBUF pressure: peak usage {s['peak_sbuf_usage_bytes'] / 1024:.0f} KiB of "
                   f"{sbuf_cap / 1024:.0f} KiB per partition.")
    if s["peak_psum_usage_bytes"] > 0.9 * profile.chip.psum.bytes_per_partition:
        out.append("PSUM pressure: all 8 banks are nearly full at the peak; TensorE may stall "
                   "on Vector/Scalar draining PSUM.")
    races = find_races(profile.program)
    if races:
        first = profile.program[races[0].second]
        where = f" (first at {first.loc.short()})" if first.loc is not None else ""
        out.append(f"Cross-core races: {len(races)} pair(s) of HBM accesses from different cores "
                   f"touch the same bytes with no core_barrier between them{where}; on hardware "
                   "their result depends on timing.")
    top = s["top_lines"][:3]
    if top:
        out.append("Top source lines by summed instruction time: " + ", ".join(
            f"{t['location']} ({t['time_ns'] / 1000:.2f} µs)" for t in top) + ".")
    return out


def format_summary(s: dict[str, Any]) -> str:
    """Text form of `summary()`: metric lines, then insights."""
    lines = [f"kernel {s.get('kernel') or '?'} on {s['chip']}: {s['total_time_us']:.3f} µs",
             f"  total_time                      {s['total_time']:.9f} s",
             f"  mfu_estimated_percent           {s['mfu_estimated_percent']:.2f}",
             f"  hfu_estimated_percent           {s['hfu_estimated_percent']:.2f}",
             f"  mbu_estimated_percent           {s['mbu_estimated_percent']:.2f}",
             f"  hbm_read_bytes                  {s['hbm_read_bytes']}",
             f"  hbm_write_bytes                 {s['hbm_write_bytes']}",
             f"  spill_reload_bytes              {s.get('spill_reload_bytes', 0)}",
             f"  spill_save_bytes                {s.get('spill_save_bytes', 0)}",
             f"  dma_count                       {s['dma_count']}",
             f"  average_dma_size                {s['average_dma_size']:.0f}",
             f"  instruction_count               {s['instruction_count']}"]
    if s.get("host_peak_resident_bytes"):
        lines.append(f"  host_peak_resident_bytes        {s['host_peak_resident_bytes']}")
    for row in ROW_ORDER:
        lines.append(f"  {row + '_active_time_percent':36s}{s[f'{row}_active_time_percent']:.2f}"
                     f"   ({s[f'{row}_instruction_count']} instructions)")
    lines.append(f"  {'dma_active_time_percent':36s}{s['dma_active_time_percent']:.2f}")
    lines.append("insights:")
    lines += [f"  - {i}" for i in s["insights"]]
    return "\n".join(lines)


# ---------------------------------------------------------------- saving and diffs
def save(profile: Profile, path: str, kernel: str = "", png: str | None = None,
         dma_rows: str = "queue") -> dict[str, str]:
    """Write the trace (.pftrace or .json), a `<path>.summary.json` sidecar and optionally a PNG."""
    trace = to_trace(profile, kernel, dma_rows)
    side = trace_files.write(trace, [summary(profile, kernel)], path)
    out = {"trace": path, "summary": side}
    if png:
        from trnsim.viz import plot

        out["png"] = plot(trace, png)
    return out


def summary_path(trace_path: str) -> str:
    return trace_files.summary_path(trace_path)


def diff(a: dict[str, Any], b: dict[str, Any]) -> str:
    """Before/after comparison of two summaries: total, per engine, per source line."""
    def pct(x: float, y: float) -> str:
        return f"{100.0 * (y - x) / x:+.1f}%" if x else "n/a"

    ta, tb = a["total_time_us"], b["total_time_us"]
    lines = [f"total_time_us        {ta:12.3f} -> {tb:12.3f}  ({pct(ta, tb)}; "
             f"speedup {ta / tb if tb else float('inf'):.2f}x)"]
    for key in ("mfu_estimated_percent", "mbu_estimated_percent", "dma_count",
                "average_dma_size", "instruction_count"):
        lines.append(f"{key:21s}{a[key]:12.2f} -> {b[key]:12.2f}")
    lines.append("engine active time (% of total):")
    for row in (*ROW_ORDER, "dma"):
        k = f"{row}_active_time_percent"
        lines.append(f"  {row:18s}{a.get(k, 0):8.2f} -> {b.get(k, 0):8.2f}")
    lines.append("source lines (time in µs):")
    la = {t["location"]: t for t in a.get("top_lines", [])}
    lb = {t["location"]: t for t in b.get("top_lines", [])}
    for loc in sorted(set(la) | set(lb), key=lambda k: -max(la.get(k, {}).get("time_ns", 0),
                                                              lb.get(k, {}).get("time_ns", 0))):
        x = la.get(loc, {}).get("time_ns", 0.0) / 1000
        y = lb.get(loc, {}).get("time_ns", 0.0) / 1000
        lines.append(f"  {loc:28s}{x:10.3f} -> {y:10.3f}")
    return "\n".join(lines)


def diff_steps(a: dict[str, Any], b: dict[str, Any]) -> str:
    """Before/after comparison of two profile_torch summaries (e.g. an eager and a compiled
    training step): device time, launches, per op and per source line."""
    ta, tb = a["step_time_ns"] / 1000, b["step_time_ns"] / 1000
    speed = f"speedup {ta / tb:.2f}x" if tb else "no device time after"
    lines = [f"step device time us {ta:12.3f} -> {tb:12.3f}  "
             f"({f'{100.0 * (tb - ta) / ta:+.1f}%' if ta else 'n/a'}; {speed})",
             f"kernel launches      {a['launches']:12d} -> {b['launches']:12d}"]
    for title, key, name in (("ops", "ops", "op"), ("source lines", "source_lines", "location")):
        ra = {r[name]: r for r in a.get(key, [])}
        rb = {r[name]: r for r in b.get(key, [])}
        count = "count" if key == "ops" else "launches"
        lines.append(f"{title} (time us x launches):")
        for k in sorted(set(ra) | set(rb), key=lambda k: -max(ra.get(k, {}).get("time_ns", 0),
                                                             rb.get(k, {}).get("time_ns", 0))):
            cells = []
            for r in (ra.get(k), rb.get(k)):
                cells.append(f"{r['time_ns'] / 1000:10.3f} x{r[count]:<4d}" if r else
                             f"{'-':>10}      ")
            lines.append(f"  {k[:44]:44s}{cells[0]} -> {cells[1]}")
    return "\n".join(lines)


def concatenate(profiles: Sequence[tuple[str, Profile]], dma_rows: str = "queue",
                launch_args: Sequence[dict[str, Any]] | None = None) -> Trace:
    """One trace of several launches laid end to end, with a `Kernels` row naming each
    (`launch_args`: extra slice arguments per launch, e.g. the ATen op and source line)."""
    slices: list[Slice] = []
    counters: list[Counter] = []
    tracks: list[tuple[str, str]] = [("Kernels", "launches")]
    offset = 0.0
    id_base = 0
    for n, (name, p) in enumerate(profiles):
        t = to_trace(p, name, dma_rows, offset, id_base)
        args = {"launch": n, **(launch_args[n] if launch_args else {})}
        slices.append(Slice(id_base + 10**9, "Kernels", name or f"kernel {n}", offset,
                            offset + p.latency_ns, "kernel", args))
        slices += t.slices
        for tr in t.tracks:
            if tr not in tracks:
                tracks.append(tr)
        counters += t.counters
        id_base = max((s.id for s in t.slices), default=id_base) + 1
        offset += p.latency_ns
    merged: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
    for c in counters:
        merged.setdefault((c.track, c.unit, c.group), []).extend(c.points)
    counters = [Counter(k[0], k[1], tuple(sorted(v)), k[2]) for k, v in merged.items()]
    meta = {"chip": profiles[0][1].chip.name if profiles else "", "launches": len(profiles),
            "kernel": "+".join(n for n, _ in profiles), "total_time_us": offset / 1000.0}
    return Trace(tracks, slices, counters, meta)
