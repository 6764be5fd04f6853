"""The text of compile_stats().report(): graphs, then fused regions fused vs eager."""

from __future__ import annotations

from typing import Any


def _us(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1000:.2f}"


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def format_stats(stats: Any) -> str:
    lines = [f"trnsim torch.compile: {stats.compiles} graph(s) compiled, {stats.recompiles} "
             f"recompile(s), {stats.graph_breaks} graph-break piece(s), {stats.cached_runs} "
             f"cached run(s)"]
    for g in stats.graphs:
        tags = [t for t, on in (("recompile", g.recompile), ("graph break", g.graph_break)) if on]
        aot = ", ".join(f"{k} {n} nodes" for k, n in g.aot_graphs.items())
        runs = ", ".join(f"{k} x{n}" for k, n in g.runs.items())
        lines.append(f"  graph {g.number} [{g.compile_id}] {g.frame}"
                     f"{' (' + ', '.join(tags) + ')' if tags else ''}: {g.ops} ops; {aot}; "
                     f"runs {runs or 'none'}; {len(g.regions)} fused region(s)")
        if g.signature:
            lines.append(f"      inputs {g.signature}")
    if stats.regions:
        lines.append(f"  {'fused region':<22} {'where':<26} {'fused us':>9} {'eager us':>9} "
                     f"{'speedup':>8}   {'bwd fused':>9} {'bwd eager':>9} {'speedup':>8}  "
                     f"replaces")
        for r in stats.regions:
            where = r.loc.short() if r.loc is not None else "?"
            lines.append(
                f"  {r.name:<22} {where:<26} {_us(r.fused_ns):>9} {_us(r.eager_ns):>9} "
                f"{_x(r.speedup):>8}   {_us(r.fused_backward_ns):>9} "
                f"{_us(r.eager_backward_ns):>9} {_x(r.backward_speedup):>8}  {r.parts}"
                + (f"  ({r.note})" if r.note else ""))
    if stats.layout_copies:
        lines.append("  outputs copied into the traced layout: " + ", ".join(
            f"{k} x{v}" for k, v in sorted(stats.layout_copies.items())))
    return "\n".join(lines)
