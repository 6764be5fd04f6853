"""Multi-rank results: a launch's Profile over every rank, one merged timeline, step metrics.

    run = trnsim.nki.ranks.run_ranks(kernel, per_rank_args, chip="trn2")
    prof = profile_of(run)         # RanksProfile: a Profile with cores rank*lnc + c
    prof.step().text()             # per rank: compute vs collective, exposed, what bounds it
    prof.save("ranks.pftrace")     # a group of rows per rank, CC-core rows for collectives

`step_summary` is the one definition of the metrics, shared with the PyTorch backend (its
ranks report launch and collective intervals); `merge_traces` joins per-rank timelines.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trnsim.report import to_trace
from trnsim.timing.metrics import union_length
from trnsim.timing.profile import Profile
from trnsim.timing.world import CollectiveSpan, WorldTiming
from trnsim.trace import Counter, Slice, Trace

Interval = tuple[float, float]


# ---------------------------------------------------------------- step metrics


@dataclass(frozen=True)
class RankStep:
    """One rank's step, in ns: busy computing, in collectives, and how much of the
    collective time no compute hid (exposed)."""

    rank: int
    start_ns: float
    end_ns: float
    compute_ns: float
    collective_ns: float
    exposed_ns: float
    wait_ns: float  # waiting for other ranks to reach a collective (skew)

    @property
    def step_ns(self) -> float:
        return self.end_ns - self.start_ns

    @property
    def idle_ns(self) -> float:
        return max(0.0, self.step_ns - self.compute_ns - self.exposed_ns - self.wait_ns)


@dataclass(frozen=True)
class StepSummary:
    """Every rank's step; the step ends with its slowest rank."""

    ranks: tuple[RankStep, ...]
    collectives: Mapping[str, float]  # api -> exposed ns summed over ranks

    @property
    def step_ns(self) -> float:
        return max((r.end_ns for r in self.ranks), default=0.0) - \
            min((r.start_ns for r in self.ranks), default=0.0)

    @property
    def critical(self) -> RankStep:
        """The rank that finishes last."""
        return max(self.ranks, key=lambda r: (r.end_ns, -r.rank))

    @property
    def bound(self) -> str:
        """What bounds the step on its critical rank: "compute", "communication" (exposed
        collective time) or "waiting" (other ranks arrive late at collectives)."""
        r = self.critical
        shares = {"compute": r.compute_ns - (r.collective_ns - r.exposed_ns),
                  "communication": r.exposed_ns, "waiting": r.wait_ns}
        return max(shares, key=lambda k: shares[k])

    def text(self) -> str:
        lines = [f"{'rank':>5} {'step us':>10} {'compute us':>11} {'collective us':>14} "
                 f"{'exposed us':>11} {'wait us':>9}"]
        for r in self.ranks:
            lines.append(f"{r.rank:>5} {r.step_ns / 1e3:>10.2f} {r.compute_ns / 1e3:>11.2f} "
                         f"{r.collective_ns / 1e3:>14.2f} {r.exposed_ns / 1e3:>11.2f} "
                         f"{r.wait_ns / 1e3:>9.2f}")
        top = max(self.collectives.items(), key=lambda kv: kv[1], default=None)
        worst = f"; most exposed: {top[0]} ({top[1] / 1e3:.2f} us over all ranks)" if top else ""
        lines.append(f"step {self.step_ns / 1e3:.2f} us, bound by {self.bound} "
                     f"(critical rank {self.critical.rank}){worst}")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        return {"step_ns": self.step_ns, "bound": self.bound,
                "critical_rank": self.critical.rank,
                "ranks": [{**vars(r), "step_ns": r.step_ns} for r in self.ranks],
                "exposed_by_collective_ns": dict(self.collectives)}


def _overlap(a: Sequence[Interval], b: Sequence[Interval]) -> float:
    return union_length(a) + union_length(b) - union_length([*a, *b])


def step_summary(per_rank: Mapping[int, Mapping[str, Any]]) -> StepSummary:
    """Metrics from each rank's intervals: {"compute": [...], "collective": [(start, end,
    api), ...], "wait": [...]} in ns."""
    ranks, exposed_by = [], {}
    for rank in sorted(per_rank):
        d = per_rank[rank]
        comp = [tuple(x[:2]) for x in d.get("compute", ())]
        coll = [tuple(x[:2]) for x in d.get("collective", ())]
        wait = [tuple(x[:2]) for x in d.get("wait", ())]
        allv = [*comp, *coll, *wait]
        start = min((s for s, _ in allv), default=0.0)
        end = max((e for _, e in allv), default=0.0)
        coll_ns = union_length(coll)
        exposed = coll_ns - _overlap(coll, comp)
        for x in d.get("collective", ()):
            api = x[2] if len(x) > 2 else "collective"
            alone = (x[1] - x[0]) - _overlap([tuple(x[:2])], comp)
            exposed_by[api] = exposed_by.get(api, 0.0) + alone
        ranks.append(RankStep(rank, start, end, union_length(comp), coll_ns, exposed,
                              union_length(wait) - _overlap(wait, comp)))
    return StepSummary(tuple(ranks), exposed_by)


# ---------------------------------------------------------------- NKI launches


class RanksProfile(Profile):
    """A multi-rank launch's Profile (cores numbered rank*lnc + c) with the rank map, the
    collectives' spans and the step metrics."""

    def __init__(self, timing: WorldTiming, outputs: Any = None):
        super().__init__(timing.program, timing.timeline, timing.chip, outputs)
        self.lnc, self.ranks, self.topology = timing.lnc, timing.ranks, timing.topology
        self.spans: list[CollectiveSpan] = timing.spans

    def rank_of_core(self, core: int) -> tuple[int, int]:
        return divmod(core, self.lnc)

    def _rank_intervals(self) -> dict[int, dict[str, list]]:
        tpn = self.timeline.ticks_per_ns
        tl = self.timeline
        out: dict[int, dict[str, list]] = {r: {"compute": [], "collective": []}
                                           for r in range(self.ranks)}
        for ins in self.program:
            if ins.opcode == "cc_transfer":  # counted in the collective's span
                continue
            i = ins.index
            if tl.start[i] >= 0 and tl.end[i] >= 0:
                out[ins.core // self.lnc]["compute"].append((tl.start[i] / tpn, tl.end[i] / tpn))
        for s in self.spans:
            out[s.rank]["collective"].append((s.start_ns, s.end_ns, s.api))
        return out

    def step(self) -> StepSummary:
        """Per rank: compute vs collective time, exposed collective time, what bounds it."""
        return step_summary(self._rank_intervals())

    def trace(self, kernel: str = "", dma_rows: str = "queue") -> Trace:
        """One timeline: a group of rows per rank (engines, DMA queues, CC-core)."""
        base = to_trace(self, kernel or self.kernel_name, dma_rows)
        rename = {}
        for name, group in base.tracks:
            core = int(group[2:]) if group.startswith("nc") else None
            if core is None:
                rename[name] = (name, group)
                continue
            r, c = self.rank_of_core(core)
            rename[name] = (name.replace(f"(nc{core})", f"(rank{r} nc{c})"), f"rank{r}")
        tracks: list[tuple[str, str]] = []
        for r in range(self.ranks):
            tracks.append((f"CC-core(rank{r})", f"rank{r}"))
            tracks += [rename[n] for n, _ in base.tracks if rename[n][1] == f"rank{r}"]
        # the collective cores trigger transfers at no cost: no row for those triggers
        tracks = [t for t in tracks if not t[0].startswith("cc(")]
        slices = [Slice(s.id, rename.get(s.track, (s.track,))[0], s.name, s.start_ns,
                        s.end_ns, s.category, s.args, s.source, s.flows_from)
                  for s in base.slices if not s.track.startswith("cc(")]
        nid = max((s.id for s in slices), default=0) + 1
        for k, sp in enumerate(self.spans):
            slices.append(Slice(nid + k, f"CC-core(rank{sp.rank})", sp.api, sp.start_ns,
                                sp.end_ns, "collective",
                                {"algorithm": sp.algorithm, "bytes": sp.nbytes,
                                 "steps": sp.steps, "ranks": list(sp.group)}))
        meta = {**base.metadata, "ranks": self.ranks, "topology": self.topology.name,
                "lnc": self.lnc}
        return Trace(tracks, slices, base.counters, meta)

    def save(self, path: str, kernel: str = "", png: str | None = None,
             dma_rows: str = "queue") -> dict[str, str]:
        """Write the merged timeline (.pftrace or .json) and, optionally, a PNG."""
        trace = self.trace(kernel, dma_rows)
        trace.save(path)
        written = {"trace": path}
        if png:
            from trnsim.viz import plot

            plot(trace, png)
            written["png"] = png
        return written


def profile_of(run: Any, reorder: bool = True) -> RanksProfile:
    """Time a finished multi-rank launch (trnsim.nki.ranks.RanksRun)."""
    prof = RanksProfile(run.timing(reorder), run.outputs)
    prof.kernel_name = run.kernel_name
    return prof


def profile_ranks(kernel: Any, args: Any, kwargs: dict[str, Any] | None = None,
                  **options: Any) -> RanksProfile:
    """Run `kernel` on every rank (trnsim.nki.ranks.run_ranks options) and time it."""
    from trnsim.nki.ranks import run_ranks

    reorder = options.pop("reorder", True)
    return profile_of(run_ranks(kernel, args, kwargs, **options), reorder)


# ---------------------------------------------------------------- merged timelines


def merge_traces(traces: Sequence[tuple[int, Trace]], title: str = "") -> Trace:
    """One trace of several ranks' traces: every track and group gets a `rank<r>` prefix."""
    tracks: list[tuple[str, str]] = []
    slices: list[Slice] = []
    counters: list[Counter] = []
    base = 0
    for rank, t in traces:
        pre = f"rank{rank}"
        for name, group in t.tracks:
            tracks.append((f"{pre} {name}", f"{pre} {group}" if group else pre))
        for s in t.slices:
            slices.append(Slice(s.id + base, f"{pre} {s.track}", s.name, s.start_ns, s.end_ns,
                                s.category, {**s.args, "rank": rank}, s.source,
                                tuple(f + base for f in s.flows_from)))
        for c in t.counters:
            counters.append(Counter(f"{pre} {c.track}", c.unit, c.points,
                                    f"{pre} {c.group}" if c.group else pre))
        base = max((s.id for s in slices), default=base) + 1
    meta = {"kernel": title or f"{len(traces)} ranks", "ranks": len(traces)}
    return Trace(tracks, slices, counters, meta)
