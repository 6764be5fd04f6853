"""Profile: a timed kernel run with Neuron-profiler metrics; `profile()` runs a kernel and times it.

Knows nothing about values beyond handing back the kernel's outputs.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trnsim.allocation import TileRecord
from trnsim.chipspec import ChipSpec
from trnsim.gcpause import gc_paused
from trnsim.program import Instruction
from trnsim.timing.compiler import CompilerRules
from trnsim.timing.deps import Dep
from trnsim.timing.metrics import (
    TENSOR_OPS,
    busy_fraction,
    flops_adjustment,
    hbm_throughput,
    is_transpose,
    matmul_flops,
    psum_bank_usage,
    rate_series,
    union_length,
    usage_samples,
)
from trnsim.timing.reorder import schedule
from trnsim.timing.scheduler import Timeline

# Timeline rows of one core, top to bottom as in the profiler (trainium-hw.md D.1).
ROWS = ("sync", "tensor", "tensor_matrix", "vector", "scalar", "gpsimd")


@dataclass(frozen=True)
class Event:
    """One bar on an engine row: instruction `index` on `row` of `core`, in ns.

    Rows: sync, tensor (LoadStationary / LDWEIGHTS), tensor_matrix (MultiplyMoving / MATMUL),
    vector, scalar, gpsimd. `wait_ns` is the semaphore stall before it (evt_wait_time) and
    `producer` the instruction waited on (-1: none). `kind` is "LoadStationary",
    "MultiplyMoving", "DmaTrigger", "ActTableLoad" (the ScalarE table load before activation
    `index`, timing/compiler.py) or "" (plain instruction).
    """

    index: int
    core: int
    row: str
    start_ns: float
    end_ns: float
    wait_ns: float
    producer: int
    kind: str = ""


@dataclass(frozen=True)
class DmaTransfer:
    """One DMA packet: instruction `index`'s share on DMA engine `engine` of `core`, in ns."""

    index: int
    core: int
    queue: str  # qSyncIO, qScalarDynamicHW, qGpSimdDynamic, ...
    engine: int  # 0..engines_per_core-1 (profiler DMA-E<n>)
    start_ns: float
    end_ns: float
    nbytes: int
    descriptors: int


class Profile:
    """A timed run. Public interface (for reports and the trace writer):

    outputs, latency_ns, chip, program (list[Instruction]), timeline (raw ticks);
    start_ns(i), end_ns(i), wait_ns(i), producer(i), deps(i): per instruction (DMA: trigger
    issue to last byte landed; deps = every semaphore wait with its kind);
    events: list[Event] (engine rows, LS/MM split, DMA triggers);
    dma_transfers: list[DmaTransfer] (per queue and per DMA engine, with bytes);
    engine_active_ns / engine_instruction_time_ns / instruction_counts: per (core, row);
    mfu, hfu, mbu (percent), hardware_flops, model_flops, transpose_flops;
    hbm_read_bytes, hbm_write_bytes, spill_reload_bytes, spill_save_bytes, dma_count,
    average_dma_bytes;
    counters: name -> [(ns, value)]: "sbuf_usage[nc]" / "psum_usage[nc]" (bytes per partition
    in use), "pending_dma" (transfers in flight), "hbm_throughput" (GB/s), "throttle[nc]"
    (TensorE utilization cap, 0..1); summary(): a dict of the above.
    """

    def __init__(
        self,
        program: list[Instruction],
        timeline: Timeline,
        chip: ChipSpec,
        outputs: Any = None,
        values: bool = True,
    ):
        self.program = program
        self.timeline = timeline
        self.chip = chip
        self.outputs = outputs
        self.values = values
        self.kernel_name = ""  # set by profile(): the kernel function's name
        # Peak host RAM behind the run's simulated memories (core.Device); 0 if not known.
        self.host_peak_resident_bytes = 0
        tpn = timeline.ticks_per_ns
        self._tpn = tpn
        ends = [t for t in timeline.end if t >= 0]
        self.latency_ticks = max(ends, default=0)
        self.latency_ns = self.latency_ticks / tpn
        self.cores = sorted({ins.core for ins in program}) or [0]

    # ------------------------------------------------------------ per instruction
    def start_ns(self, i: int) -> float:
        return self.timeline.start[i] / self._tpn

    def end_ns(self, i: int) -> float:
        return self.timeline.end[i] / self._tpn

    def wait_ns(self, i: int) -> float:
        return self.timeline.wait[i] / self._tpn

    def producer(self, i: int) -> int:
        return self.timeline.blocker[i]

    @property
    def notes(self) -> list[str]:
        """What a compiler rule could not do for this run (e.g. an allocation policy that
        did not fit, timed at the traced addresses instead); each was also warned."""
        return self.timeline.notes

    def deps(self, i: int) -> list[Dep]:
        """Every producer instruction i waits for: (producer, flow|anti|output, operand)."""
        return [Dep(*d) for d in self.timeline.deps[i]]

    @functools.cached_property
    def events(self) -> list[Event]:
        tl, tpn, out = self.timeline, self._tpn, []
        for ins in self.program:
            i = ins.index
            core, queue = tl.queue[i]
            wait, prod = tl.wait[i] / tpn, tl.blocker[i]
            if i in tl.dma:
                out.append(
                    Event(
                        i,
                        core,
                        queue,
                        tl.start[i] / tpn,
                        tl.issue_end[i] / tpn,
                        wait,
                        prod,
                        "DmaTrigger",
                    )
                )
            elif i in tl.ls:
                s, e = tl.ls[i]
                out.append(Event(i, core, "tensor", s / tpn, e / tpn, wait, prod, "LoadStationary"))
                out.append(
                    Event(
                        i,
                        core,
                        "tensor_matrix",
                        tl.start[i] / tpn,
                        tl.end[i] / tpn,
                        wait,
                        prod,
                        "MultiplyMoving",
                    )
                )
            else:
                load = tl.table_loads.get(i)
                if load is not None:
                    s, e = load
                    out.append(Event(i, core, queue, s / tpn, e / tpn, 0.0, -1, "ActTableLoad"))
                out.append(Event(i, core, queue, tl.start[i] / tpn, tl.end[i] / tpn, wait, prod))
        return out

    @functools.cached_property
    def dma_transfers(self) -> list[DmaTransfer]:
        tpn = self._tpn
        return [
            DmaTransfer(
                c.transfer,
                c.core,
                c.queue,
                c.engine,
                c.start / tpn,
                c.end / tpn,
                c.nbytes,
                c.descriptors,
            )
            for c in self.timeline.chunks
        ]

    # ------------------------------------------------------------ engines
    @functools.cached_property
    def engine_active_ns(self) -> Mapping[tuple[int, str], float]:
        """Union of instruction intervals per (core, row), semaphore waits excluded."""
        spans: dict[tuple[int, str], list[tuple[float, float]]] = {}
        for ev in self.events:
            spans.setdefault((ev.core, ev.row), []).append((ev.start_ns, ev.end_ns))
        return {k: union_length(v) for k, v in sorted(spans.items())}

    @functools.cached_property
    def engine_instruction_time_ns(self) -> Mapping[tuple[int, str], float]:
        out: dict[tuple[int, str], float] = {}
        for ev in self.events:
            out[(ev.core, ev.row)] = out.get((ev.core, ev.row), 0.0) + ev.end_ns - ev.start_ns
        return dict(sorted(out.items()))

    @functools.cached_property
    def instruction_counts(self) -> Mapping[tuple[int, str], int]:
        out: dict[tuple[int, str], int] = {}
        for ev in self.events:
            out[(ev.core, ev.row)] = out.get((ev.core, ev.row), 0) + 1
        return dict(sorted(out.items()))

    # ------------------------------------------------------------ FLOPs and utilization
    @functools.cached_property
    def _flops(self) -> tuple[float, float, float, float]:
        hw = model = transp = adj = 0.0
        v = self.chip.nc_version
        for ins in self.program:
            if ins.opcode in TENSOR_OPS:
                f = matmul_flops(ins)
                hw += f
                if is_transpose(ins):
                    transp += f
                else:
                    model += f
                    adj += f * flops_adjustment(ins, v)
        return hw, model, transp, adj

    @property
    def hardware_flops(self) -> float:
        return self._flops[0]

    @property
    def model_flops(self) -> float:
        return self._flops[1]

    @property
    def transpose_flops(self) -> float:
        return self._flops[2]

    def _peak_flops(self) -> float:
        return self.chip.peak_tflops("bf16") * 1e12 * len(self.cores)

    def mfu_percent(self, bf16_adjusted: bool = False) -> float:
        """Model FLOPs (matmuls, not transposes) over the BF16 peak of the cores used.

        bf16_adjusted=True scales FP32 x4, FP8 x0.5, MX x0.25 as the schema text says; the
        default counts raw FLOPs as the Trn2 tutorial screenshots do (trainium-hw.md D.3)."""
        if self.latency_ns <= 0:
            return 0.0
        flops = self._flops[3] if bf16_adjusted else self._flops[1]
        return 100.0 * flops / (self.latency_ns * 1e-9 * self._peak_flops())

    @property
    def mfu(self) -> float:
        return self.mfu_percent()

    @property
    def hfu(self) -> float:
        """Hardware FLOPs (transposes included) over the BF16 peak of the cores used."""
        if self.latency_ns <= 0:
            return 0.0
        return 100.0 * self.hardware_flops / (self.latency_ns * 1e-9 * self._peak_flops())

    # ------------------------------------------------------------ memory
    @functools.cached_property
    def _hbm(self) -> tuple[int, int]:
        r = w = 0
        for plan, _, _ in self.timeline.dma.values():
            r += plan.hbm_read
            w += plan.hbm_write
        return r, w

    @property
    def hbm_read_bytes(self) -> int:
        return self._hbm[0]

    @property
    def hbm_write_bytes(self) -> int:
        return self._hbm[1]

    @property
    def mbu(self) -> float:
        """HBM bytes over the HBM bandwidth share of the cores used, in percent."""
        if self.latency_ns <= 0:
            return 0.0
        share = self.chip.hbm.bandwidth_gbps * len(self.cores) / self.chip.cores_per_chip
        return 100.0 * (self.hbm_read_bytes + self.hbm_write_bytes) / (self.latency_ns * share)

    @functools.cached_property
    def _spills(self) -> tuple[int, int]:
        """Bytes of the compiler's reload and spill ("save") DMAs (Beta-1 block tensors)."""
        reload = save = 0
        for ins in self.program:
            kind = ins.attrs.get("spill_reload")
            if kind == "reload":
                reload += sum(o.nbytes for o in ins.writes)
            elif kind == "save":
                save += sum(o.nbytes for o in ins.writes)
        return reload, save

    @property
    def spill_reload_bytes(self) -> int:
        return self._spills[0]

    @property
    def spill_save_bytes(self) -> int:
        return self._spills[1]

    @property
    def dma_count(self) -> int:
        return len(self.timeline.dma)

    @property
    def average_dma_bytes(self) -> float:
        n = self.dma_count
        return sum(p.nbytes for p, _, _ in self.timeline.dma.values()) / n if n else 0.0

    # ------------------------------------------------------------ counters
    @functools.cached_property
    def counters(self) -> Mapping[str, list[tuple[float, float]]]:
        tl, tpn = self.timeline, self._tpn
        out: dict[str, list[tuple[float, float]]] = {
            "pending_dma": [(t / tpn, float(n)) for t, n in tl.pending_samples],
            "hbm_throughput": hbm_throughput(tl.chunks, tpn),
        }
        start = [s / tpn for s in tl.start]
        end = [e / tpn for e in tl.end]
        for c in self.cores:
            out[f"throttle[{c}]"] = (
                [(t / tpn, cap) for t, cap in tl.throttle[c].samples] if c in tl.throttle else []
            )
            for space in ("sbuf", "psum"):
                out[f"{space}_usage[{c}]"] = [
                    (t, float(b)) for t, b in usage_samples(self.program, start, end, space, c)
                ]
            out[f"tensor_utilization[{c}]"] = busy_fraction(
                ((e.start_ns, e.end_ns) for e in self.events
                 if e.core == c and e.row == "tensor_matrix"), self.latency_ns, 500.0)
            banks = psum_bank_usage(self.program, start, end, c, self.chip.psum.bank_bytes)
            for bank, pts in banks.items():
                out[f"psum_bank{bank}_usage[{c}]"] = pts
        out["dma_throughput"] = rate_series(
            (t.start_ns, t.end_ns, t.nbytes) for t in self.dma_transfers)
        return out

    def summary(self) -> dict[str, Any]:
        """Summary metrics named as in `neuron-profile view --output-format summary-text`."""
        s: dict[str, Any] = {
            "total_time": self.latency_ns * 1e-9,
            "mfu_estimated_percent": self.mfu,
            "hfu_estimated_percent": self.hfu,
            "mbu_estimated_percent": self.mbu,
            "hardware_flops": self.hardware_flops,
            "transpose_flops": self.transpose_flops,
            "hbm_read_bytes": self.hbm_read_bytes,
            "hbm_write_bytes": self.hbm_write_bytes,
            "spill_reload_bytes": self.spill_reload_bytes,
            "spill_save_bytes": self.spill_save_bytes,
            "dma_count": self.dma_count,
            "average_dma_size": self.average_dma_bytes,
            "instruction_count": len(self.program),
        }
        for (core, row), ns in self.engine_active_ns.items():
            s[f"nc{core}_{row}_engine_active_time"] = ns * 1e-9
            s[f"nc{core}_{row}_engine_active_time_percent"] = (
                100.0 * ns / self.latency_ns if self.latency_ns else 0.0
            )
            s[f"nc{core}_{row}_instruction_count"] = self.instruction_counts[(core, row)]
        return s

    def save(
        self, path: str, kernel: str = "", png: str | None = None, dma_rows: str = "queue"
    ) -> dict[str, str]:
        """Write the timeline (.pftrace or .json), a summary sidecar, and optionally a PNG."""
        from trnsim.report import save

        return save(self, path, kernel, png, dma_rows)

    def plot(self, path: str, window_us: tuple[float, float] | None = None) -> str:
        """Draw the timeline (engine and DMA rows, counters beneath) into a PNG."""
        from trnsim.report import to_trace
        from trnsim.viz import plot

        return plot(to_trace(self), path, window_us)

    def report(self, kernel: str = "") -> str:
        """The summary as text, with insights in plain words."""
        from trnsim.report import format_summary, summary

        return format_summary(summary(self, kernel))

    def __repr__(self) -> str:
        return (
            f"Profile({self.chip.name}, {len(self.program)} instructions, "
            f"{self.latency_ns:.1f} ns, MFU {self.mfu:.1f} %, MBU {self.mbu:.1f} %)"
        )


def time_program(
    program: list[Instruction],
    chip: ChipSpec,
    outputs: Any = None,
    values: bool = True,
    reorder: bool = True,
    rules: CompilerRules | None = None,
    allocations: Sequence[TileRecord] | None = None,
    order: str = "compiler",
) -> Profile:
    """Schedule a program record on `chip` and wrap it as a Profile (reorder: in the
    compiler's order, see timing/reorder.py; False: as written; order: which order when
    reordering, reorder.ORDERS; rules: the compiler rules of timing/compiler.py, default all
    on; allocations: the launch's on-chip allocation records, `run.device.allocations`, which
    the rule `allocation` needs unless it is "traced")."""
    with gc_paused():  # (see schedule)
        tl = schedule(program, chip, reorder, rules, allocations, order)
        return Profile(program, tl, chip, outputs, values)


def run_timing(run: Any, rules: CompilerRules | None = None) -> tuple[str, CompilerRules | None]:
    """The order and compiler rules a launch is timed with: its kernel's
    nki.compiler.CompileConfig (KernelRun.extra["compile_config"], set by nki.jit's Kernel),
    on top of `rules` (the what-if rules a caller passed; default all on)."""
    config = getattr(run, "extra", {}).get("compile_config")
    return ("compiler", rules) if config is None else config.timing_options(rules)


def time_run(run: Any, reorder: bool = True, rules: CompilerRules | None = None,
             outputs: Any = None, values: bool = True) -> Profile:
    """time_program for a finished launch (trnsim.nki.runner.KernelRun), in the order and
    with the rules its compile config asks for (run_timing), with its allocation records."""
    order, rules = run_timing(run, rules)
    device = getattr(run, "device", None)
    return time_program(run.program, run.chip, outputs, values, reorder, rules,
                        getattr(device, "allocations", None), order)


def profile(
    kernel: Any,
    *args: Any,
    chip: Any = "trn2",
    values: bool = True,
    lnc: int = 1,
    reorder: bool = True,
    rules: CompilerRules | None = None,
    numerics: str | None = None,
    **kwargs: Any,
) -> Profile:
    """Run `kernel(*args, **kwargs)` on the simulated `chip` and time it.

    values=False skips all numerics (timing only: the program record and timeline are the same,
    outputs are None), so kernels over any amount of simulated HBM can be timed.
    reorder=False times the instructions in program order instead of the compiler's order;
    rules=CompilerRules(...) switches the compiler behaviours of timing/compiler.py (what-if;
    refetch_clean_blocks and evict_by_next_use change what a Beta-1 launch records, the others
    how it is timed; e.g. CompilerRules(allocation="ring") re-places the automatic tiles).
    numerics="fast" computes nc_matmul in fp32 BLAS (core.NUMERICS); the timeline is the same.
    `kernel` may be a plain function, an @nki.jit kernel or a launched `kernel[2]`.
    """
    from trnsim.nki.jit import _as_kernel
    from trnsim.nki.runner import resolve_chip

    k = _as_kernel(kernel)
    if lnc > 1 and k.generation == "ga" and not k.grid:
        k = k[lnc]
    opts: dict[str, Any] = {} if numerics is None else {"numerics": numerics}
    if rules is not None and getattr(k, "takes_compiler_rules", False):
        opts["rules"] = rules  # two rules act while a Beta-1 kernel runs (its allocation)
    run = k.launch(args, kwargs, chip=resolve_chip(chip), values=values, **opts)
    prof = time_run(run, reorder, rules, run.outputs if values else None, values)
    prof.kernel_name = run.kernel_name
    prof.host_peak_resident_bytes = run.device.host_peak_resident_bytes
    return prof
