"""Trace: a timeline of slices, flows and counters, and its file formats.

Formats: Perfetto protobuf (.pftrace, via the `perfetto` package's protos), Chrome JSON (.json),
and the golden-trace text format (a header line plus one event per line). Imports nothing of
trnsim: a Profile converts itself into a Trace.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

GOLDEN_VERSION = 1
METADATA_NAME = "trnsim"  # the .pftrace metadata entry holding Trace.metadata as JSON


@dataclass(frozen=True)
class Slice:
    """One bar on a track: an instruction on an engine, or a DMA transfer on a queue/engine."""

    id: int
    track: str
    name: str
    start_ns: float
    end_ns: float
    category: str = ""
    args: Mapping[str, Any] = field(default_factory=dict)
    source: tuple[str, int, str] | None = None  # (file, line, function)
    flows_from: tuple[int, ...] = ()  # ids of producer slices (dependency arrows)


@dataclass(frozen=True)
class Counter:
    """A counter track sampled as a step function: (t_ns, value) points."""

    track: str
    unit: str
    points: tuple[tuple[float, float], ...]
    group: str = ""


@dataclass
class Trace:
    """Tracks in display order, slices, counters and run metadata."""

    tracks: list[tuple[str, str]]  # (track name, group) e.g. ("Vector(nc0)", "nc0")
    slices: list[Slice]
    counters: list[Counter] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)

    # ------------------------------------------------------------------ size control
    def limited(self, max_slices: int) -> Trace:
        """At most `max_slices` slices, keeping the earliest per track in proportion.

        Perfetto's UI stays responsive to a few hundred thousand slices; past the limit we keep
        a prefix of each track (the metadata records how many were dropped).
        """
        if len(self.slices) <= max_slices:
            return self
        per_track: dict[str, list[Slice]] = {}
        for s in self.slices:
            per_track.setdefault(s.track, []).append(s)
        share = max(1, max_slices // max(1, len(per_track)))
        kept = [s for ss in per_track.values() for s in ss[:share]]
        kept_ids = {s.id for s in kept}
        kept = [Slice(s.id, s.track, s.name, s.start_ns, s.end_ns, s.category, s.args, s.source,
                      tuple(f for f in s.flows_from if f in kept_ids)) for s in kept]
        kept.sort(key=lambda s: (s.start_ns, s.id))
        meta = {**self.metadata, "dropped_slices": len(self.slices) - len(kept)}
        return Trace(self.tracks, kept, self.counters, meta)

    # ------------------------------------------------------------------ writers
    def save(self, path: str, max_slices: int = 500_000) -> str:
        """Write by extension: .pftrace (Perfetto protobuf) or .json (Chrome trace)."""
        trace = self.limited(max_slices)
        ext = os.path.splitext(path)[1].lower()
        if ext == ".json":
            data = json.dumps(trace.to_chrome_json()).encode()
        elif ext in (".pftrace", ".perfetto-trace", ".pb"):
            data = trace.to_perfetto_bytes()
        else:
            raise ValueError(f"{path}: unknown trace format '{ext}' (use .pftrace or .json)")
        with open(path, "wb") as f:
            f.write(data)
        return path

    def _int_times(self) -> dict[int, tuple[int, int]]:
        """Integer-ns (begin, end) per slice, at least 1 ns long (Perfetto's unit)."""
        out = {}
        for s in self.slices:
            b = round(s.start_ns)
            out[s.id] = (b, max(round(s.end_ns), b + 1))
        return out

    def _lanes(self) -> dict[int, int]:
        """Lane per slice so that slices on one lane never overlap (Perfetto needs nesting)."""
        times = self._int_times()
        lanes: dict[int, int] = {}
        ends: dict[str, list[int]] = {}
        for s in sorted(self.slices, key=lambda s: (times[s.id][0], s.id)):
            track_ends = ends.setdefault(s.track, [])
            for i, e in enumerate(track_ends):
                if e <= times[s.id][0]:
                    track_ends[i] = times[s.id][1]
                    lanes[s.id] = i
                    break
            else:
                track_ends.append(times[s.id][1])
                lanes[s.id] = len(track_ends) - 1
        return lanes

    def to_perfetto_bytes(self) -> bytes:
        from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

        trace = pb.Trace()
        seq = 1
        uuids: dict[str, int] = {}
        next_uuid = 1000

        def add_track(name: str, parent: int | None, rank: int, counter_unit: str | None = None,
                      process_pid: int | None = None) -> int:
            nonlocal next_uuid
            next_uuid += 1
            pkt = trace.packet.add()
            td = pkt.track_descriptor
            td.uuid = next_uuid
            if process_pid is not None:
                td.process.pid = process_pid
                td.process.process_name = name
            else:
                td.name = name
            if parent is not None:
                td.parent_uuid = parent
            td.sibling_order_rank = rank
            td.child_ordering = pb.TrackDescriptor.ChildTracksOrdering.EXPLICIT
            if counter_unit is not None:
                td.counter.unit_name = counter_unit
            return next_uuid

        groups: dict[str, int] = {}
        for _, group in self.tracks:
            if group not in groups:
                groups[group] = add_track(group or "chip", None, len(groups),
                                          process_pid=len(groups) + 1)
        lanes = self._lanes()
        lane_count: dict[str, int] = {}
        for s in self.slices:
            lane_count[s.track] = max(lane_count.get(s.track, 0), lanes[s.id] + 1)
        rank = 0
        for name, group in self.tracks:
            for lane in range(max(1, lane_count.get(name, 1))):
                key = name if lane == 0 else f"{name} #{lane + 1}"
                uuids[key] = add_track(key, groups[group], rank)
                rank += 1
        times = self._int_times()
        successors = _successors(self.slices)
        events: list[tuple[int, int, Any]] = []
        for s in self.slices:
            lane = lanes[s.id]
            uuid = uuids[s.track if lane == 0 else f"{s.track} #{lane + 1}"]
            events.append((times[s.id][0], 1, (s, uuid)))
            events.append((times[s.id][1], 0, (s, uuid)))
        events.sort(key=lambda e: (e[0], e[1], e[2][0].id))
        for t, kind, (s, uuid) in events:
            pkt = trace.packet.add()
            pkt.timestamp = t
            pkt.trusted_packet_sequence_id = seq
            ev = pkt.track_event
            ev.track_uuid = uuid
            if kind == 1:
                ev.type = pb.TrackEvent.Type.TYPE_SLICE_BEGIN
                ev.name = s.name
                if s.category:
                    ev.categories.append(s.category)
                for k, v in s.args.items():
                    _annotate(ev.debug_annotations.add(), k, v)
                if s.source is not None:
                    ev.source_location.file_name = s.source[0]
                    ev.source_location.line_number = s.source[1]
                    ev.source_location.function_name = s.source[2]
                    _annotate(ev.debug_annotations.add(), "nki_source_location",
                              f"{os.path.basename(s.source[0])}:{s.source[1]}")
                for f in s.flows_from:
                    ev.terminating_flow_ids.append(_flow_id(f, s.id))
                for succ in successors.get(s.id, ()):
                    ev.flow_ids.append(_flow_id(s.id, succ))
            else:
                ev.type = pb.TrackEvent.Type.TYPE_SLICE_END
        for c in self.counters:
            uuid = add_track(c.track, groups.get(c.group), rank, counter_unit=c.unit)
            rank += 1
            for t, v in c.points:
                pkt = trace.packet.add()
                pkt.timestamp = round(t)
                pkt.trusted_packet_sequence_id = seq
                pkt.track_event.type = pb.TrackEvent.Type.TYPE_COUNTER
                pkt.track_event.track_uuid = uuid
                pkt.track_event.double_counter_value = float(v)
        # The run metadata, last: Perfetto shows it in its metadata table, and a file cut
        # short loses it, which is how a reader tells a truncated trace (trace_files.py).
        meta = trace.packet.add().chrome_events.metadata.add()
        meta.name = METADATA_NAME
        meta.json_value = json.dumps(_jsonable(self.metadata, None), sort_keys=True)
        return trace.SerializeToString()

    def to_chrome_json(self) -> dict[str, Any]:
        """Chrome trace-event JSON: one pid per group, one tid per track lane."""
        lanes = self._lanes()
        pids: dict[str, int] = {}
        tids: dict[tuple[str, int], int] = {}
        out: list[dict[str, Any]] = []
        for name, group in self.tracks:
            if group not in pids:
                pids[group] = len(pids) + 1
                out.append({"ph": "M", "pid": pids[group], "name": "process_name",
                            "args": {"name": group or "chip"}})
            pid = pids[group]
            tid = tids.setdefault((name, 0), len(tids) + 1)
            out.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name",
                        "args": {"name": name}})
            out.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_sort_index",
                        "args": {"sort_index": tid}})
        group_of = dict(self.tracks)
        for s in self.slices:
            pid = pids[group_of[s.track]]
            lane = lanes[s.id]
            tid = tids.setdefault((s.track, lane), len(tids) + 1)
            args = dict(s.args)
            if s.source is not None:
                args["nki_source_location"] = f"{s.source[0]}:{s.source[1]}"
            out.append({"ph": "X", "pid": pid, "tid": tid, "name": s.name, "cat": s.category,
                        "ts": s.start_ns / 1000.0, "dur": (s.end_ns - s.start_ns) / 1000.0,
                        "args": _jsonable(args), "id": s.id})
            for f in s.flows_from:
                out.append({"ph": "f", "bp": "e", "id": _flow_id(f, s.id), "pid": pid,
                            "tid": tid, "ts": s.start_ns / 1000.0, "name": "dep", "cat": "dep"})
        starts = {s.id: s for s in self.slices}
        for s in self.slices:
            for f in s.flows_from:
                p = starts.get(f)
                if p is None:
                    continue
                pid = pids[group_of[p.track]]
                tid = tids[(p.track, lanes[p.id])]
                out.append({"ph": "s", "id": _flow_id(f, s.id), "pid": pid, "tid": tid,
                            "ts": p.end_ns / 1000.0, "name": "dep", "cat": "dep"})
        for c in self.counters:
            pid = pids.get(c.group, 0)
            for t, v in c.points:
                out.append({"ph": "C", "pid": pid, "name": c.track, "ts": t / 1000.0,
                            "args": {c.unit or "value": v}})
        return {"traceEvents": out, "displayTimeUnit": "ns",
                "metadata": _jsonable(self.metadata, None)}

    # ------------------------------------------------------------------ golden format
    def golden_lines(self) -> list[str]:
        """Deterministic text: a JSON header, then one JSON event per line, in time order."""
        header = {"golden_version": GOLDEN_VERSION, **_jsonable(self.metadata)}
        lines = [json.dumps(header, sort_keys=True)]
        for s in sorted(self.slices, key=lambda s: (s.start_ns, s.track, s.id)):
            ev = {"track": s.track, "name": s.name, "start_ns": round(s.start_ns, 3),
                  "end_ns": round(s.end_ns, 3)}
            if s.source is not None:
                ev["src"] = f"{os.path.basename(s.source[0])}:{s.source[1]}"
            for k in ("bytes", "wait_ns", "operands"):
                if k in s.args:
                    ev[k] = _jsonable(s.args[k])
            lines.append(json.dumps(ev, sort_keys=True))
        return lines


def _successors(slices: Iterable[Slice]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for s in slices:
        for f in s.flows_from:
            out.setdefault(f, []).append(s.id)
    return out


def _flow_id(src: int, dst: int) -> int:
    return (src << 24) ^ dst ^ 0x5A5A5A


def _annotate(ann: Any, key: str, value: Any) -> None:
    ann.name = key
    if isinstance(value, bool):
        ann.bool_value = value
    elif isinstance(value, int):
        ann.int_value = value
    elif isinstance(value, float):
        ann.double_value = value
    else:
        ann.string_value = str(value)


def _jsonable(x: Any, digits: int | None = 6) -> Any:
    """JSON-ready data; floats rounded to `digits` (None: exact, for the run metadata)."""
    if isinstance(x, dict):
        return {str(k): _jsonable(v, digits) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v, digits) for v in x]
    if isinstance(x, (bool, int, str)) or x is None:
        return x
    if isinstance(x, float):
        return x if digits is None else round(x, digits)
    return str(x)


def diff_golden(expected: list[str], actual: list[str]) -> str | None:
    """None if equal, else a description of the first differing event."""
    for i, (e, a) in enumerate(zip(expected, actual, strict=False)):
        if e != a:
            what = "header" if i == 0 else f"event {i}"
            ej, aj = json.loads(e), json.loads(a)
            keys = sorted(k for k in set(ej) | set(aj) if ej.get(k) != aj.get(k))
            fields = ", ".join(f"{k}: expected {ej.get(k)!r}, got {aj.get(k)!r}" for k in keys)
            return f"first difference at {what}: {fields}"
    if len(expected) != len(actual):
        return (f"event count differs: expected {len(expected) - 1}, got {len(actual) - 1} "
                f"(first extra/missing at event {min(len(expected), len(actual))})")
    return None


def read_perfetto(path: str) -> Any:
    """Decode a .pftrace with Perfetto's own protobuf definitions."""
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

    t = pb.Trace()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return t


def trace_from_perfetto(path: str) -> Trace:
    """Rebuild a Trace (tracks, slices, counters, metadata) from a .pftrace written by
    `Trace.save`."""
    return trace_from_perfetto_message(read_perfetto(path), os.path.basename(path))


def trace_from_perfetto_message(t: Any, label: str = "") -> Trace:
    """A Trace from a decoded Perfetto `Trace` message (see trace_from_perfetto)."""
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

    names: dict[int, str] = {}
    parents: dict[int, int] = {}
    counter_tracks: dict[int, str] = {}
    for p in t.packet:
        if p.HasField("track_descriptor"):
            td = p.track_descriptor
            names[td.uuid] = td.process.process_name if td.HasField("process") else td.name
            if td.HasField("parent_uuid"):
                parents[td.uuid] = td.parent_uuid
            if td.HasField("counter"):
                counter_tracks[td.uuid] = td.counter.unit_name
    tracks: list[tuple[str, str]] = []
    slices: list[Slice] = []
    points: dict[int, list[tuple[float, float]]] = {}
    open_: dict[int, list[tuple[int, Any]]] = {}
    for p in t.packet:
        if not p.HasField("track_event"):
            continue
        ev = p.track_event
        u = ev.track_uuid
        if ev.type == pb.TrackEvent.Type.TYPE_COUNTER:
            points.setdefault(u, []).append((float(p.timestamp), ev.double_counter_value))
        elif ev.type == pb.TrackEvent.Type.TYPE_SLICE_BEGIN:
            open_.setdefault(u, []).append((p.timestamp, ev))
        elif ev.type == pb.TrackEvent.Type.TYPE_SLICE_END and open_.get(u):
            start, b = open_[u].pop()
            track = names[u].split(" #")[0]
            group = names.get(parents.get(u, -1), "")
            if (track, group) not in tracks:
                tracks.append((track, group))
            args = {a.name: (a.string_value or a.int_value or a.double_value)
                    for a in b.debug_annotations}
            src = None
            if b.HasField("source_location"):
                sl = b.source_location
                src = (sl.file_name, sl.line_number, sl.function_name)
            slices.append(Slice(len(slices) + 1, track, b.name, float(start), float(p.timestamp),
                                b.categories[0] if b.categories else "", args, src))
    counters = [Counter(names[u], counter_tracks.get(u, ""), tuple(pts),
                        names.get(parents.get(u, -1), "")) for u, pts in points.items()]
    end = max((s.end_ns for s in slices), default=0.0)
    meta: dict[str, Any] = {"total_time_us": end / 1000.0, "kernel": label}
    for p in t.packet:
        if p.HasField("chrome_events"):
            for m in p.chrome_events.metadata:
                if m.name == METADATA_NAME and m.json_value:
                    meta.update(json.loads(m.json_value))
    return Trace(tracks, slices, counters, meta)
