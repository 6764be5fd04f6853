"""`trnsim.profile_torch()`: one timeline of every kernel a stretch of PyTorch code launched.

    with trnsim.profile_torch() as p:
        loss = model(x); loss.backward(); opt.step()
    print(p.report())                    # per-op table: count, simulated time, share, MFU
    p.save("step.pftrace", png="step.png")

Launches are laid end to end on the device clock (the device runs one kernel at a time);
each is labelled with its ATen op (or user kernel), the shapes, the user's source line and,
in backward, the autograd node it ran for. Ops that ran on the host (reference-only ops,
float64 inputs, the host fallback) have no device time and are listed apart.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from trnsim.backend.launch import LaunchRecord
from trnsim.backend.launch import label as launch_label
from trnsim.backend.runtime import Runtime, runtime

from trnsim.trace_files import STEP_KEY


@dataclass
class OpRow:
    op: str
    count: int
    time_ns: float
    share: float  # of the step's device time
    mfu: float  # percent of the cores' bf16 peak over this op's launches


class TorchProfile:
    """The launches of one profiled region (a context manager; see the module docstring)."""

    def __init__(self, rt: Runtime | None = None, dma_rows: str = "queue"):
        self.rt = rt or runtime()
        self.dma_rows = dma_rows
        self.launches: list[LaunchRecord] = []
        self.host_ops: Counter[str] = Counter()
        self._host0: Counter[str] = Counter()
        self._fallback0: Counter[str] = Counter()
        self.fallback_ops: Counter[str] = Counter()

    def __enter__(self) -> TorchProfile:
        rt = self.rt
        with rt.lock:
            self._host0 = Counter(rt.host_counts)
            self._fallback0 = Counter(rt.fallback_counts)
            rt.sessions.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        rt = self.rt
        with rt.lock:
            if self in rt.sessions:
                rt.sessions.remove(self)
            self.host_ops = Counter(rt.host_counts) - self._host0
            self.fallback_ops = Counter(rt.fallback_counts) - self._fallback0

    def add(self, rec: LaunchRecord) -> None:
        self.launches.append(rec)

    # ------------------------------------------------------------ figures
    @property
    def step_ns(self) -> float:
        """Simulated device time of the region: the sum of its launches."""
        return sum(r.latency_ns for r in self.launches)

    def label(self, rec: LaunchRecord) -> str:
        """"aten::mm [MmBackward0] train.py:12": op, autograd node, source line."""
        return launch_label(rec)

    def table(self) -> list[OpRow]:
        """Per op, most device time first."""
        time: dict[str, float] = {}
        count: Counter[str] = Counter()
        flops: dict[str, float] = {}
        peak: dict[str, float] = {}
        for r in self.launches:
            key = r.op
            count[key] += 1
            time[key] = time.get(key, 0.0) + r.latency_ns
            p = r.profile
            flops[key] = flops.get(key, 0.0) + (p.model_flops if p is not None else 0.0)
            peak[key] = p._peak_flops() if p is not None else 0.0
        total = self.step_ns or 1.0
        rows = []
        for key, t in time.items():
            mfu = 100.0 * flops[key] / (t * 1e-9 * peak[key]) if t and peak[key] else 0.0
            rows.append(OpRow(key, count[key], t, t / total, mfu))
        return sorted(rows, key=lambda r: -r.time_ns)

    def source_lines(self) -> list[dict[str, Any]]:
        """Device time per user source line ("file.py:12"), most first."""
        time: dict[str, float] = {}
        count: Counter[str] = Counter()
        for r in self.launches:
            key = r.loc.short() if r.loc is not None else "?"
            time[key] = time.get(key, 0.0) + r.latency_ns
            count[key] += 1
        return [{"location": k, "time_ns": t, "launches": count[k]}
                for k, t in sorted(time.items(), key=lambda kv: -kv[1])]

    def report(self) -> str:
        rt = self.rt
        lines = [f"trnsim profile_torch: {len(self.launches)} kernel launches on {rt.name} "
                 f"({rt.chip.name}), simulated device time {self.step_ns / 1000:.2f} us",
                 f"{'op':<52} {'count':>6} {'time us':>11} {'share':>7} {'MFU %':>7}"]
        for row in self.table():
            lines.append(f"{row.op[:52]:<52} {row.count:>6} {row.time_ns / 1000:>11.2f} "
                         f"{100 * row.share:>6.1f}% {row.mfu:>7.2f}")
        if self.host_ops:
            lines.append("ran on the host (no device time): " + ", ".join(
                f"{k} x{v}" for k, v in sorted(self.host_ops.items())))
        if self.fallback_ops:
            lines.append("host fallback (TRNSIM_FALLBACK=cpu): " + ", ".join(
                f"{k} x{v}" for k, v in sorted(self.fallback_ops.items())))
        return "\n".join(lines)

    def summary(self) -> dict[str, Any]:
        return {
            "device": self.rt.name, "chip": self.rt.chip.name,
            "launches": len(self.launches), "step_time_ns": self.step_ns,
            "ops": [vars(r) for r in self.table()],
            "source_lines": self.source_lines(),
            "host_ops": dict(self.host_ops), "fallback_ops": dict(self.fallback_ops),
        }

    # ------------------------------------------------------------ timeline
    def trace(self) -> Any:
        """The region as one trace (trnsim.trace.Trace): launches end to end."""
        from trnsim import report

        profiles = [(self.label(r), r.profile) for r in self.launches if r.profile is not None]
        extra = [{"aten_op": r.op, "kernel": r.kernel, "shapes": r.shapes,
                  "source": f"{r.loc.filename}:{r.loc.lineno}" if r.loc else "",
                  "autograd_node": r.backward, "graph_node": r.extra.get("graph_node", "")}
                 for r in self.launches if r.profile is not None]
        trace = report.concatenate(profiles, self.dma_rows, launch_args=extra)
        trace.metadata["kernel"] = f"PyTorch on {self.rt.name} ({len(profiles)} launches)"
        trace.metadata[STEP_KEY] = self.summary()  # what `trnsim diff` compares
        return trace

    def save(self, path: str, png: str | None = None) -> dict[str, str]:
        """Write the timeline (.pftrace or .json), a summary sidecar and optionally a PNG."""
        import json

        from trnsim import report

        if not self.launches:
            raise ValueError("profile_torch: the region launched no kernel (reference mode, or "
                             "only host ops?): there is no timeline to write")
        trace = self.trace()
        trace.save(path)
        written = {"trace": path}
        side = report.summary_path(path)
        with open(side, "w") as f:
            json.dump(self.summary(), f, indent=1, sort_keys=True)
        written["summary"] = side
        if png:
            from trnsim.viz import plot

            plot(trace, png)
            written["png"] = png
        return written


def profile_torch(dma_rows: str = "queue") -> TorchProfile:
    """Record the kernel launches of a region of PyTorch code on the trn device."""
    return TorchProfile(dma_rows=dma_rows)
