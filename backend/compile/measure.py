"""Timing launches aside: kernels that run for a measurement only, off the user's record.

The fused-region report compares a fused kernel with the eager ops it replaced. Those ops run
once more, on the same device tensors, inside `detached()`: their launches are simulated and
timed as always, but the device clock, the launch counters, open `profile_torch` sessions and
`trnsim profile`'s recording never see them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from trnsim.backend.launch import LaunchRecord
from trnsim.backend.runtime import Runtime


class _Collector:
    """A profiling session that only keeps the records (rt.sessions protocol: add)."""

    def __init__(self, into: list[LaunchRecord]):
        self.into = into

    def add(self, rec: LaunchRecord) -> None:
        self.into.append(rec)


@contextmanager
def detached(rt: Runtime) -> Iterator[list[LaunchRecord]]:
    """Run launches off the record; yields the list their LaunchRecords go to."""
    from trnsim.nki.runner import _RECORDER

    got: list[LaunchRecord] = []
    with rt.lock:
        saved = (rt.clock_ns, rt.launch_count, list(rt.sessions), rt.cli_sink, rt.graph_node,
                 Counter(rt.kernel_runs), Counter(rt.host_counts), rt.kernel_errors)
        rt.sessions[:] = [_Collector(got)]
        rt.cli_sink = None
        rt.graph_node = None
    token = _RECORDER.set(None)
    try:
        yield got
    finally:
        _RECORDER.reset(token)
        with rt.lock:
            (rt.clock_ns, rt.launch_count, sessions, rt.cli_sink, rt.graph_node, runs, hosts,
             rt.kernel_errors) = saved
            rt.sessions[:] = sessions
            _restore(rt.kernel_runs, runs)
            _restore(rt.host_counts, hosts)


def _restore(live: Counter, saved: Counter) -> None:
    live.clear()
    live.update(saved)


def total_ns(records: list[Any]) -> float:
    return sum(r.latency_ns for r in records)
