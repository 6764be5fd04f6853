"""What torch.compile(backend="trn") compiled in this process: graphs, fused regions, counts.

The state hangs off the device's Runtime (`rt.compiled`), the process's one piece of device
state; `compile_stats()` returns a snapshot with a printable report. Knows nothing of how
graphs run or what the patterns match.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from trnsim.backend.runtime import Runtime, runtime

from trnsim.program import SourceLocation


@dataclass
class RegionStats:
    """One fused region: the pattern, the user's line, and its simulated time (ns) fused and
    as the eager ops it replaced (forward; backward in training graphs), from its first run."""

    name: str  # "linear_act#0": pattern and number in the process
    pattern: str
    parts: str  # the eager ops it replaced, "linear -> gelu"
    loc: SourceLocation | None
    graph: int  # the Dynamo graph it is in
    fused_ns: float | None = None
    eager_ns: float | None = None
    fused_backward_ns: float | None = None
    eager_backward_ns: float | None = None
    fused_launches: int = 0
    eager_launches: int = 0
    fused_backward_launches: int = 0
    eager_backward_launches: int = 0
    note: str = ""  # why a figure is missing

    @property
    def speedup(self) -> float | None:
        if not self.fused_ns or self.eager_ns is None:
            return None
        return self.eager_ns / self.fused_ns

    @property
    def backward_speedup(self) -> float | None:
        if not self.fused_backward_ns or self.eager_backward_ns is None:
            return None
        return self.eager_backward_ns / self.fused_backward_ns


@dataclass
class GraphStats:
    """One graph Dynamo handed to the backend, and the AOTAutograd graphs made from it."""

    number: int
    compile_id: str  # Dynamo's "frame/attempt"; attempt > 0 is a recompile
    frame: str  # the compiled function and its file:line
    recompile: bool
    graph_break: bool  # the graph of a graph break's resume function
    signature: str  # shapes and dtypes of the tensor inputs
    ops: int  # call nodes of the Dynamo graph, before fusion
    regions: list[str] = field(default_factory=list)
    aot_graphs: dict[str, int] = field(default_factory=dict)  # kind -> ATen nodes
    aot_ops: dict[str, tuple[str, ...]] = field(default_factory=dict)  # kind -> their ops
    runs: dict[str, int] = field(default_factory=dict)  # kind -> calls


@dataclass
class CompileStats:
    """A snapshot of `rt.compiled` (see compile_stats())."""

    graphs: list[GraphStats]
    regions: list[RegionStats]
    layout_copies: dict[str, int]  # ATen op -> outputs re-laid out to the traced strides

    @property
    def compiles(self) -> int:
        """Graphs compiled (Dynamo graphs, recompiles and graph-break pieces included)."""
        return len(self.graphs)

    @property
    def recompiles(self) -> int:
        return sum(g.recompile for g in self.graphs)

    @property
    def graph_breaks(self) -> int:
        return sum(g.graph_break for g in self.graphs)

    @property
    def cached_runs(self) -> int:
        """Calls served by an already compiled graph (Dynamo's cache hits)."""
        return sum(max(0, n - 1) for g in self.graphs for k, n in g.runs.items()
                   if k != "backward")

    def region(self, name: str) -> RegionStats:
        for r in self.regions:
            if r.name == name:
                return r
        have = ", ".join(r.name for r in self.regions) or "none"
        raise KeyError(f"no fused region {name!r} (have: {have})")

    def report(self) -> str:
        from trnsim.backend.compile.report import format_stats

        return format_stats(self)


class CompileState:
    """The live record behind compile_stats()."""

    def __init__(self) -> None:
        self.graphs: list[GraphStats] = []
        self.regions: dict[str, RegionStats] = {}
        self.pattern_counts: dict[str, int] = {}
        self.layout_copies: dict[str, int] = {}
        self.specs: dict[str, Any] = {}  # region name -> fusion.FusedRegion (how to re-time it)

    def new_graph(self, **fields: Any) -> GraphStats:
        g = GraphStats(number=len(self.graphs), **fields)
        self.graphs.append(g)
        return g

    def new_region(self, pattern: str, parts: str, loc: SourceLocation | None,
                   graph: GraphStats) -> RegionStats:
        n = self.pattern_counts.get(pattern, 0)
        self.pattern_counts[pattern] = n + 1
        r = RegionStats(f"{pattern}#{n}", pattern, parts, loc, graph.number)
        self.regions[r.name] = r
        graph.regions.append(r.name)
        return r

    def snapshot(self) -> CompileStats:
        return CompileStats(copy.deepcopy(self.graphs), copy.deepcopy(list(self.regions.values())),
                            dict(self.layout_copies))


def state(rt: Runtime | None = None) -> CompileState:
    rt = rt or runtime()
    with rt.lock:
        if rt.compiled is None:
            rt.compiled = CompileState()
        return rt.compiled


def compile_stats() -> CompileStats:
    """What torch.compile(backend="trn") has compiled and run in this process: graphs
    (recompiles and graph breaks marked), runs per graph, fused regions with their simulated
    time fused and as the eager ops they replaced."""
    return state().snapshot()


def reset_compile_stats() -> None:
    """Forget the record (torch._dynamo.reset() forgets the compiled graphs themselves)."""
    rt = runtime()
    with rt.lock:
        rt.compiled = CompileState()
