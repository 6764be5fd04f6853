"""A distributed step on every rank: its kernel launches and collectives on the device clock,
the step metrics across ranks (trnsim.multirank.step_summary) and one merged timeline.

    with profile_step() as step:            # on every rank
        loss = model(x); loss.backward(); opt.step()
    step.summary().text()                   # collective: every rank gets the same summary
    step.save("step.pftrace")               # collective: rank 0 writes the merged timeline

Per rank the timeline has a `Kernels` row (each launch at its place on the device clock), the
engine and DMA rows of those launches, and a `Collectives` row: each collective as the wait
for the other ranks to arrive, then the transfer itself. Exchanges go through the default
group's store, so they work across hosts as the collectives do.
"""

from __future__ import annotations

import json
import pickle
from typing import Any

from trnsim.backend.distributed.state import state
from trnsim.backend.profiler import TorchProfile
from trnsim.backend.runtime import runtime


class StepProfile:
    """One region of a distributed run on this rank (a context manager)."""

    _seq = 0  # how many StepProfiles this process made (their exchange tags)

    def __init__(self, dma_rows: str = "queue"):
        self.rt = runtime()
        self.st = state(self.rt)
        self.torch = TorchProfile(self.rt, dma_rows)
        self.events: list[Any] = []
        self._first = 0
        self.start_ns = 0.0
        self.end_ns = 0.0
        StepProfile._seq += 1
        self.tag = f"step{StepProfile._seq}"
        self._summary: Any = None

    def __enter__(self) -> StepProfile:
        self._first = len(self.st.events)
        self.start_ns = self.rt.clock_ns
        self.torch.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.torch.__exit__(*exc)
        self.events = list(self.st.events[self._first:])
        self.end_ns = self.rt.clock_ns

    # ------------------------------------------------------------ figures
    @property
    def rank(self) -> int:
        return self.st.rank

    @property
    def step_ns(self) -> float:
        """This rank's simulated time in the region (device clock)."""
        return self.end_ns - self.start_ns

    @property
    def collective_ns(self) -> float:
        return sum(e.end_ns - e.start_ns for e in self.events)

    def intervals(self) -> dict[str, list]:
        """This rank's compute, collective and wait intervals (ns, device clock)."""
        comp = [(r.start_ns, r.start_ns + r.latency_ns) for r in self.torch.launches]
        coll = [(e.start_ns, e.end_ns, e.api) for e in self.events]
        wait = [(e.arrive_ns, e.start_ns) for e in self.events if e.start_ns > e.arrive_ns]
        return {"compute": comp, "collective": coll, "wait": wait,
                "start": self.start_ns, "end": self.end_ns}

    def summary(self) -> Any:
        """The step over every rank (collective: all ranks call it): trnsim.multirank
        StepSummary. In a virtual world, this process's figures stand for every rank."""
        if self._summary is None:
            from trnsim.multirank import step_summary

            mine = self.intervals()
            pg = _default_group()
            if pg is None or self.st.virtual:
                per_rank = {self.rank: mine}
            else:
                got = pg._exchange.gather(f"{self.tag}/m", json.dumps(mine).encode())
                per_rank = {r: json.loads(g) for r, g in enumerate(got)}
            self._summary = step_summary(per_rank)
        return self._summary

    # ------------------------------------------------------------ timeline
    def trace(self) -> Any:
        """This rank's timeline: launches at their device-clock times, collectives."""
        from trnsim.report import to_trace
        from trnsim.trace import Slice, Trace

        t0 = self.start_ns
        tracks: list[tuple[str, str]] = [("Kernels", "launches"), ("Collectives", "launches")]
        slices: list[Any] = []
        counters: list[Any] = []
        base = 0
        for n, rec in enumerate(self.torch.launches):
            if rec.profile is None:
                continue
            t = to_trace(rec.profile, self.torch.label(rec), self.torch.dma_rows,
                         rec.start_ns - t0, base)
            slices.append(Slice(base + 10**9, "Kernels", self.torch.label(rec), rec.start_ns - t0,
                                rec.start_ns - t0 + rec.latency_ns, "kernel",
                                {"launch": n, "aten_op": rec.op, "kernel": rec.kernel,
                                 "shapes": rec.shapes}))
            slices += t.slices
            tracks += [tr for tr in t.tracks if tr not in tracks]
            counters += t.counters
            base = max((s.id for s in t.slices), default=base) + 1
        for k, e in enumerate(self.events):
            sid = 2 * 10**9 + 2 * k
            if e.start_ns > e.arrive_ns:
                slices.append(Slice(sid, "Collectives", f"wait: {e.api}", e.arrive_ns - t0,
                                    e.start_ns - t0, "wait", {"seq": e.seq}))
            slices.append(Slice(sid + 1, "Collectives", e.api, e.start_ns - t0, e.end_ns - t0,
                                "collective", {"seq": e.seq, "bytes": e.nbytes,
                                               "algorithm": e.algorithm,
                                               "ranks": list(e.group), "source": e.where}))
        meta = {"chip": self.rt.chip.name, "rank": self.rank, "topology":
                self.st.topology.name, "total_time_us": self.step_ns / 1000.0}
        return Trace(tracks, slices, counters, meta)

    def save(self, path: str) -> str | None:
        """Collective: every rank sends its timeline to rank 0, which writes them as one
        trace (.pftrace or .json) with a group of rows per rank. Returns the path on rank 0."""
        from trnsim.multirank import merge_traces

        summary = self.summary()  # (a collective itself: before rank 0 goes its own way)
        mine = self.trace()
        pg = _default_group()
        if pg is None or self.st.virtual:
            traces = [(self.rank, mine)]
        else:
            got = pg._exchange.gather(f"{self.tag}/t", pickle.dumps(mine))
            traces = [(r, pickle.loads(g)) for r, g in enumerate(got)]
        if self.rank != 0:
            return None
        merged = merge_traces(traces, f"distributed step on {len(traces)} ranks "
                                      f"({self.st.topology.name})")
        merged.metadata["summary"] = summary.as_dict()
        merged.save(path)
        return path


def _default_group() -> Any:
    import torch.distributed as dist

    if not dist.is_initialized():
        return None
    pg = dist.distributed_c10d._get_default_group()
    return pg if hasattr(pg, "_exchange") else None
