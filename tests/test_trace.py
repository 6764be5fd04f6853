"""Trace formats: Perfetto protobuf decoded with Perfetto's own protos, Chrome JSON, golden diff."""

from __future__ import annotations

import json

from trnsim.trace import Counter, Slice, Trace, diff_golden, read_perfetto


def _trace() -> Trace:
    tracks = [("qSyncIO0(nc0)", "nc0"), ("Tensor(nc0)", "nc0"), ("Vector(nc0)", "nc0")]
    slices = [
        Slice(1, "qSyncIO0(nc0)", "dma_copy", 0.0, 1500.0, "dma", {"bytes": 65536},
              ("k.py", 10, "kern")),
        Slice(2, "Tensor(nc0)", "MATMUL", 1500.0, 1800.0, "matmul", {"wait_ns": 1500.0},
              ("k.py", 12, "kern"), flows_from=(1,)),
        Slice(3, "Tensor(nc0)", "MATMUL", 1600.0, 1900.0, "matmul", {}, ("k.py", 12, "kern")),
        Slice(4, "Vector(nc0)", "TENSOR_COPY", 1900.0, 1900.0, "copy", {}, ("k.py", 13, "kern"),
              flows_from=(2, 3)),
    ]
    counters = [Counter("PSUM usage", "bytes", ((0.0, 0.0), (1500.0, 2048.0), (1900.0, 0.0)),
                        "nc0")]
    return Trace(tracks, slices, counters, {"chip": "trn2", "kernel": "k"})


def test_perfetto_roundtrip_has_tracks_slices_sources_flows_counters(tmp_path):
    path = _trace().save(str(tmp_path / "t.pftrace"))
    t = read_perfetto(path)
    names = {p.track_descriptor.name for p in t.packet if p.HasField("track_descriptor")}
    assert {"Tensor(nc0)", "Tensor(nc0) #2", "Vector(nc0)", "qSyncIO0(nc0)", "PSUM usage"} <= names
    procs = {p.track_descriptor.process.process_name for p in t.packet
             if p.HasField("track_descriptor") and p.track_descriptor.HasField("process")}
    assert procs == {"nc0"}
    begins = [p.track_event for p in t.packet
              if p.HasField("track_event") and p.track_event.type == 1]
    assert [e.name for e in begins].count("MATMUL") == 2
    assert {e.source_location.line_number for e in begins} == {10, 12, 13}
    assert any(e.flow_ids for e in begins)
    assert any(e.terminating_flow_ids for e in begins)
    counters = [p.track_event.double_counter_value for p in t.packet
                if p.HasField("track_event") and p.track_event.type == 4]
    assert counters == [0.0, 2048.0, 0.0]
    # Slices on one track nest properly: every begin has its end on the same track.
    depth: dict[int, int] = {}
    for p in t.packet:
        if p.HasField("track_event") and p.track_event.type in (1, 2):
            u = p.track_event.track_uuid
            depth[u] = depth.get(u, 0) + (1 if p.track_event.type == 1 else -1)
            assert 0 <= depth[u] <= 1
    assert set(depth.values()) == {0}


def test_chrome_json(tmp_path):
    path = _trace().save(str(tmp_path / "t.json"))
    with open(path) as f:
        data = json.loads(f.read())
    xs = [e for e in data["traceEvents"] if e["ph"] == "X"]
    assert len(xs) == 4
    assert xs[0]["args"]["nki_source_location"] == "k.py:10"
    assert any(e["ph"] == "s" for e in data["traceEvents"])
    assert any(e["ph"] == "C" for e in data["traceEvents"])


def test_golden_diff_reports_first_differing_event():
    a = _trace().golden_lines()
    t = _trace()
    t.slices[2] = Slice(3, "Tensor(nc0)", "MATMUL", 1600.0, 1950.0, "matmul", {},
                        ("k.py", 12, "kern"))
    b = t.golden_lines()
    assert diff_golden(a, a) is None
    msg = diff_golden(a, b)
    assert msg == "first difference at event 3: end_ns: expected 1900.0, got 1950.0"


def test_limited_trace_keeps_every_track():
    t = _trace().limited(3)
    assert {s.track for s in t.slices} == {"qSyncIO0(nc0)", "Tensor(nc0)", "Vector(nc0)"}
    assert t.metadata["dropped_slices"] == 1
