"""Trace files on disk: write a trace with its launch summaries inside and a checked summary
cache beside it; read a trace back, refusing a missing, truncated or foreign file in one line.

The trace is the record: its metadata carries the summaries (`trnsim_summary`). The sidecar
`<trace>.summary.json` is a cache holding the trace file's SHA-256; a reader uses it only when
that matches, and otherwise reads the summaries from the trace itself. Knows trace.py's formats
and errors, and which metrics a summary has (report.py); nothing about profiles or timing.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from typing import Any

from trnsim.errors import UsageError
from trnsim.trace import Trace, trace_from_perfetto_message

PERFETTO_EXTS = (".pftrace", ".perfetto-trace", ".pb")
TRACE_EXTS = (*PERFETTO_EXTS, ".json")
SUMMARY_KEY = "trnsim_summary"  # Trace.metadata key: {"launches": [summary, ...]}
SIDECAR = ".summary.json"
STEP_KEY = "trnsim_step_summary"  # Trace.metadata key of a profile_torch step's summary


def summary_path(trace_path: str) -> str:
    return trace_path + SIDECAR


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write(trace: Trace, launches: list[dict[str, Any]], path: str) -> str:
    """Save `trace` with the launch summaries in its metadata, then the sidecar cache that
    names the trace's SHA-256; returns the sidecar's path."""
    trace = dataclasses.replace(trace, metadata={**trace.metadata,
                                                 SUMMARY_KEY: {"launches": launches}})
    trace.save(path)
    with open(path, "rb") as f:
        sha = digest(f.read())
    side = summary_path(path)
    with open(side, "w") as f:
        json.dump({"launches": launches, "trace_sha256": sha}, f, indent=1, sort_keys=True)
    return side


def check_readable(path: str, what: str) -> None:
    """UsageError unless `path` is an existing, readable regular file."""
    if not os.path.lexists(path):
        raise UsageError(f"{what} '{path}': no such file")
    if os.path.isdir(path):
        raise UsageError(f"{what} '{path}' is a directory, not a file")
    if not os.path.isfile(path) or not os.access(path, os.R_OK):
        raise UsageError(f"{what} '{path}' is not a readable file")


def read_trace(path: str, data: bytes | None = None, summary: bool = True) -> Trace:
    """The Trace in a .pftrace or .json file that trnsim wrote (UsageError otherwise;
    summary=False: also one without the launch summaries in it)."""
    check_readable(path, "trace")
    if data is None:
        with open(path, "rb") as f:
            data = f.read()
    ext = os.path.splitext(path)[1].lower()
    if ext in PERFETTO_EXTS:
        trace = _perfetto(path, data)
    elif ext == ".json":
        trace = _chrome(path, data)
    else:
        raise UsageError(f"trace '{path}': unknown trace format '{ext}' (trnsim writes "
                         f"{', '.join(TRACE_EXTS)})")
    if summary and embedded_summaries(trace) is None:
        raise UsageError(f"trace '{path}' carries no trnsim summary: it was not written by "
                         "trnsim profile / Profile.save, or it was cut short")
    return trace


def embedded_summaries(trace: Trace) -> list[dict[str, Any]] | None:
    """The launch summaries a trace carries, None if it carries none (or malformed ones)."""
    meta = trace.metadata.get(SUMMARY_KEY)
    launches = meta.get("launches") if isinstance(meta, dict) else None
    return launches if _are_summaries(launches) else None


def _perfetto(path: str, data: bytes) -> Trace:
    from google.protobuf.message import DecodeError
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

    msg = pb.Trace()
    try:
        msg.ParseFromString(data)
    except (DecodeError, ValueError, RuntimeError) as e:
        raise UsageError(f"trace '{path}' is truncated or not a Perfetto trace ({e})") from None
    if not data or not any(p.HasField("track_descriptor") for p in msg.packet):
        raise UsageError(f"trace '{path}' is not a Perfetto trace (it holds no tracks)")
    try:
        return trace_from_perfetto_message(msg, os.path.basename(path))
    except (KeyError, ValueError) as e:  # an event on an undeclared track, bad metadata JSON
        raise UsageError(f"trace '{path}' is damaged or not a trace trnsim wrote ({e})") from None


def _chrome(path: str, data: bytes) -> Trace:
    try:
        doc = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UsageError(f"trace '{path}' is truncated or not JSON ({e})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise UsageError(f"trace '{path}' is not a Chrome trace (no 'traceEvents' list)")
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    return chrome_trace(doc["traceEvents"], meta)


def chrome_trace(events: list[Any], meta: dict[str, Any]) -> Trace:
    """A Trace from Chrome trace events as Trace.to_chrome_json writes them."""
    from trnsim.trace import Counter, Slice

    groups: dict[int, str] = {}
    threads: dict[tuple[int, int], str] = {}
    for e in events:
        if isinstance(e, dict) and e.get("ph") == "M":
            name = (e.get("args") or {}).get("name", "")
            if e.get("name") == "process_name":
                groups[e.get("pid")] = name
            elif e.get("name") == "thread_name":
                threads[(e.get("pid"), e.get("tid"))] = name
    tracks: list[tuple[str, str]] = []
    slices: list[Slice] = []
    points: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
    for e in events:
        if not isinstance(e, dict):
            continue
        pid = e.get("pid")
        if e.get("ph") == "X":
            track = threads.get((pid, e.get("tid")), f"tid {e.get('tid')}")
            group = groups.get(pid, "")
            if (track, group) not in tracks:
                tracks.append((track, group))
            start = float(e.get("ts", 0.0)) * 1000.0
            slices.append(Slice(len(slices) + 1, track, str(e.get("name", "")), start,
                                start + float(e.get("dur", 0.0)) * 1000.0,
                                str(e.get("cat", "")), dict(e.get("args") or {})))
        elif e.get("ph") == "C":
            (unit, value), = (e.get("args") or {"value": 0.0}).items()
            key = (str(e.get("name", "")), str(unit), groups.get(pid, ""))
            points.setdefault(key, []).append((float(e.get("ts", 0.0)) * 1000.0, float(value)))
    counters = [Counter(k[0], k[1], tuple(v), k[2]) for k, v in points.items()]
    return Trace(tracks, slices, counters, dict(meta))


def step_summary(path: str) -> dict[str, Any] | None:
    """The profile_torch step summary a trace carries (device time per op and per source
    line), or None for a trace of kernel launches; UsageError for a file trnsim cannot read."""
    if path.endswith(SIDECAR):
        return None
    meta = read_trace(path, summary=False).metadata.get(STEP_KEY)
    return meta if isinstance(meta, dict) and "step_time_ns" in meta else None


def load_summaries(path: str) -> tuple[list[dict[str, Any]], str]:
    """The launch summaries of a trace, and a note ("" if none) when its sidecar was not used.

    A path to a `.summary.json` itself is read as it is (an explicit choice)."""
    if path.endswith(SIDECAR):
        return _read_sidecar(path), ""
    check_readable(path, "trace")
    with open(path, "rb") as f:
        data = f.read()
    side = summary_path(path)
    cached, legacy = _cached(side, digest(data))
    if cached is not None:
        return cached, ""
    trace = read_trace(path, data, summary=legacy is None)
    launches = embedded_summaries(trace)
    if launches is None:  # written before traces carried their summaries
        return legacy, (f"note: {side} was written before traces carried their summary; "
                        "it could not be checked against the trace")
    note = "" if not os.path.exists(side) else (
        f"note: {side} does not belong to this trace (the trace changed since); "
        "the summary was read from the trace itself")
    return launches, note


def _cached(side: str, sha: str) -> tuple[list[dict[str, Any]] | None, Any]:
    """(the sidecar's summaries if it names this trace's SHA-256, else None; a sidecar's
    summaries written without a SHA-256 (older trnsim), else None)."""
    try:
        with open(side) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return None, None
    if not isinstance(doc, dict) or not _are_summaries(doc.get("launches")):
        return None, None
    if doc.get("trace_sha256") == sha:
        return doc["launches"], None
    return None, (doc["launches"] if "trace_sha256" not in doc else None)


def _read_sidecar(path: str) -> list[dict[str, Any]]:
    check_readable(path, "summary")
    try:
        with open(path) as f:
            doc = json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UsageError(f"summary '{path}' is truncated or not JSON ({e})") from None
    launches = doc.get("launches", [doc]) if isinstance(doc, dict) else None
    if not _are_summaries(launches):
        raise UsageError(f"summary '{path}' is not a trnsim summary (it lacks the metrics "
                         "trnsim profile writes)")
    return launches


def _are_summaries(launches: Any) -> bool:
    """A non-empty list of summaries with every metric trnsim view and diff print."""
    from trnsim.report import ROW_ORDER

    needed = ("kernel", "chip", "total_time_us", "total_time", "mfu_estimated_percent",
              "hfu_estimated_percent", "mbu_estimated_percent", "hbm_read_bytes",
              "hbm_write_bytes", "dma_count", "average_dma_size", "instruction_count",
              "dma_active_time_percent", "insights", "top_lines",
              *(f"{r}_active_time_percent" for r in ROW_ORDER),
              *(f"{r}_instruction_count" for r in ROW_ORDER))
    return isinstance(launches, list) and bool(launches) and all(
        isinstance(s, dict) and all(k in s for k in needed) for s in launches)
