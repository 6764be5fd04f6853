"""PNG timeline of a Trace with matplotlib: engine and DMA lanes, counters beneath.

The only module that imports matplotlib; it knows Traces, nothing else of trnsim.
"""

from __future__ import annotations

from trnsim.trace import Trace

# One colour per instruction kind (category), stable across pictures.
PALETTE = {
    "matmul": "#1f77b4", "transpose": "#17becf", "load_stationary": "#aec7e8",
    "activation": "#2ca02c", "elementwise": "#ff7f0e", "reduce": "#d62728",
    "copy": "#bcbd22", "select": "#9467bd", "gpsimd": "#8c564b", "dma": "#7f7f7f",
    "control": "#e377c2", "stats": "#98df8a", "dma_transpose": "#c5b0d5",
}


def _colour(category: str) -> str:
    if category in PALETTE:
        return PALETTE[category]
    h = sum(map(ord, category)) % 360
    import colorsys

    r, g, b = colorsys.hls_to_rgb(h / 360, 0.55, 0.55)
    return f"#{int(r * 255):02x}{int(g * 255):02x}{int(b * 255):02x}"


# Counters drawn beneath the lanes, most telling first.
COUNTER_ORDER = ("HBM throughput", "TensorE utilization", "SBUF usage", "PSUM usage",
                 "Pending DMA count", "TensorE throttle", "DMA throughput")


def _counter_rank(c: object) -> tuple[int, str]:
    name = getattr(c, "track", "")
    for i, prefix in enumerate(COUNTER_ORDER):
        if name.startswith(prefix):
            return i, name
    return len(COUNTER_ORDER), name


def plot(trace: Trace, path: str, window_us: tuple[float, float] | None = None,
         title: str | None = None, max_counters: int = 5, dpi: int = 110) -> str:
    """Draw the trace into a PNG: one row per track, counters below, time in µs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    tracks = [name for name, _ in trace.tracks if any(s.track == name for s in trace.slices)]
    counters = sorted((c for c in trace.counters if c.points), key=_counter_rank)[:max_counters]
    lo, hi = window_us if window_us else (0.0, max((s.end_ns for s in trace.slices),
                                                   default=1.0) / 1000.0)
    n_rows = len(tracks)
    height = 1.2 + 0.38 * n_rows + 1.1 * len(counters)
    ratios = [max(1.0, 0.38 * n_rows)] + [1.0] * len(counters)
    fig, axes = plt.subplots(1 + len(counters), 1, figsize=(13, height), sharex=True,
                             gridspec_kw={"height_ratios": ratios}, squeeze=False)
    ax = axes[0][0]
    row = {name: i for i, name in enumerate(tracks)}
    by_cat: dict[str, list[tuple[float, float, int]]] = {}
    for s in trace.slices:
        if s.track not in row:
            continue
        start, end = s.start_ns / 1000.0, s.end_ns / 1000.0
        if end < lo or start > hi:
            continue
        by_cat.setdefault(s.category or "other", []).append((start, max(end - start, 1e-4),
                                                              row[s.track]))
    for cat, bars in sorted(by_cat.items()):
        for r in sorted({b[2] for b in bars}):
            ax.broken_barh([(b[0], b[1]) for b in bars if b[2] == r], (r - 0.4, 0.8),
                           facecolors=_colour(cat), edgecolor="none")
    ax.set_yticks(range(n_rows))
    ax.set_yticklabels(tracks, fontsize=8)
    ax.set_ylim(n_rows - 0.5, -0.5)
    ax.grid(axis="x", alpha=0.3)
    handles = [Patch(color=_colour(c), label=c) for c in sorted(by_cat)]
    if handles:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8,
                  frameon=False)
    meta = trace.metadata
    ax.set_title(title or f"{meta.get('kernel', 'kernel')} on {meta.get('chip', '?')}: "
                 f"{meta.get('total_time_us', hi):.2f} µs", fontsize=10)
    for i, c in enumerate(counters, start=1):
        cax = axes[i][0]
        xs = [p[0] / 1000.0 for p in c.points]
        ys = [p[1] for p in c.points]
        cax.step(xs, ys, where="post", linewidth=1.0, color="#444")
        cax.fill_between(xs, ys, step="post", alpha=0.25, color="#888")
        cax.set_ylabel(f"{c.track}\n({c.unit})" if c.unit else c.track, fontsize=7, rotation=0,
                       ha="right", va="center")
        cax.tick_params(axis="y", labelsize=7)
        cax.grid(axis="x", alpha=0.3)
    axes[-1][0].set_xlim(lo, hi)
    axes[-1][0].set_xlabel("time (µs)")
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path
