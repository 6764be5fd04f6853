"""`trnsim profile | view | diff | demo`: record, read and compare engine timelines."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from trnsim import cli_checks, trace_files
from trnsim.cli import command, run_script
from trnsim.errors import UsageError


@contextmanager
def progress(label: str) -> Iterator[None]:
    """A live instruction counter on stderr while simulating; silent when not a terminal."""
    from trnsim.nki.runner import report_progress

    if not sys.stderr.isatty():
        yield
        return
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=None)

        def cb(n: int) -> None:
            bar.update(task, description=f"{label}: {n:,} instructions")

        token = report_progress(cb)
        try:
            yield
        finally:
            from trnsim.nki.runner import stop_progress

            stop_progress(token)


def _configure_profile(p: argparse.ArgumentParser) -> None:
    p.add_argument("script", help="script whose kernel launches are recorded")
    p.add_argument("script_args", nargs=argparse.REMAINDER)
    p.add_argument("-o", "--output", default="profile.pftrace",
                   help="trace file (.pftrace, or .json for Chrome's format)")
    p.add_argument("--png", default=None, help="also draw the timeline into this PNG")
    p.add_argument("--chip", default=None, help="trn1, trn2 or trn3 (default: trn3)")
    p.add_argument("--dma-rows", default="queue",
                   help="one DMA row per queue (default) or per DMA engine")
    p.add_argument("--as-written", action="store_true",
                   help="time instructions in program order, not in the compiler's order")
    p.add_argument("--allocation", default=None,
                   help="what-if: re-place automatic SBUF/PSUM tiles by this policy (traced, "
                        "ring, fast or max_reuse; default: the chip's, compiler rule "
                        "`allocation`)")
    p.add_argument("--rule-off", action="append", default=[], metavar="RULE",
                   help="what-if: time with this compiler rule off (repeatable; e.g. "
                        "sequential_buffers, reuse_stationary)")


def _split_trailing_options(args: argparse.Namespace) -> None:
    """`trnsim profile SCRIPT ARGS... -o X --png Y --chip Z`: our options may follow the
    script's arguments; everything after `--` goes to the script untouched."""
    names = {"-o": "output", "--output": "output", "--png": "png", "--chip": "chip",
             "--dma-rows": "dma_rows", "--allocation": "allocation"}
    rest, script_args = list(args.script_args), []
    while rest:
        tok = rest.pop(0)
        if tok == "--":
            script_args += rest
            break
        key, eq, val = tok.partition("=")
        if tok == "--as-written":
            args.as_written = True
        elif key == "--rule-off":
            if not eq:
                if not rest:
                    raise UsageError("--rule-off needs a value")
                val = rest.pop(0)
            args.rule_off.append(val)
        elif key in names:
            if not eq:  # `--chip=` gives the empty value; `--chip` takes the next token
                if not rest:
                    raise UsageError(f"{key} needs a value")
                val = rest.pop(0)
            setattr(args, names[key], val)
        else:
            script_args.append(tok)
    args.script_args = script_args


@command("profile", "run a script and record every kernel launch as a timeline",
         _configure_profile)
def _profile(args: argparse.Namespace) -> int:
    from trnsim import report

    _split_trailing_options(args)
    cli_checks.check_script(args.script)
    cli_checks.check_trace_output(args.output)
    cli_checks.check_png(args.png)
    cli_checks.check_chip(args.chip)
    cli_checks.check_dma_rows(args.dma_rows)
    cli_checks.check_allocation(args.allocation)
    cli_checks.check_rules_off(args.rule_off)
    from trnsim.nki.runner import record_launches, stop_recording
    from trnsim.viz import plot

    if args.chip is not None:
        os.environ["NEURON_PLATFORM_TARGET_OVERRIDE"] = args.chip.strip()
    runs: list = []
    token = record_launches(runs)
    try:
        with progress(f"simulating {os.path.basename(args.script)}"):
            run_script(args.script, args.script_args)
    finally:
        stop_recording(token)
    if not runs:
        print(f"trnsim profile: {args.script} launched no kernel", file=sys.stderr)
        return 1
    rules = None
    if args.allocation is not None or args.rule_off:
        from trnsim.timing.compiler import CompilerRules

        rules = CompilerRules(allocation=args.allocation,
                              **dict.fromkeys(args.rule_off, False))
    trace, summaries = write_profile(runs, args.output, args.dma_rows, not args.as_written,
                                     rules)
    for s in summaries:
        print(report.format_summary(s))
    print(f"wrote {args.output} ({len(runs)} launch{'es' if len(runs) > 1 else ''})")
    if args.png:
        plot(trace, args.png)
        print(f"wrote {args.png}")
    return 0


def write_profile(runs: list, output: str, dma_rows: str = "queue",
                  reorder: bool = True, rules: Any = None) -> tuple[Any, list[dict]]:
    """Time recorded launches (trnsim.nki.runner.KernelRun) and write them as one trace (and
    its summary file) to `output`; returns the trace and the launches' summaries. `rules`:
    what-if CompilerRules (default: all on, the chip's allocation policy)."""
    from trnsim import report
    from trnsim.timing.profile import time_run

    profiles = []
    for r in runs:
        prof = time_run(r, reorder=reorder, rules=rules)  # (its compile config, records)
        prof.host_peak_resident_bytes = r.device.host_peak_resident_bytes
        profiles.append((r.kernel_name, prof))
    trace = report.concatenate(profiles, dma_rows)
    summaries = [report.summary(p, name) for name, p in profiles]
    trace_files.write(trace, summaries, output)
    return trace, summaries


def _summaries(path: str) -> list[dict]:
    """A trace's launch summaries, read from the trace (its sidecar only when it matches)."""
    launches, note = trace_files.load_summaries(path)
    if note:
        print(note, file=sys.stderr)
    return launches


def _configure_view(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", help="a trace written by trnsim profile / Profile.save")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--png", default=None, help="draw the timeline into this PNG")


@command("view", "print the summary of a recorded trace", _configure_view)
def _view(args: argparse.Namespace) -> int:
    from trnsim import report

    cli_checks.check_png(args.png)
    sums = _summaries(args.trace)
    if args.json:
        print(json.dumps(sums if len(sums) > 1 else sums[0], indent=1, sort_keys=True))
    else:
        print("\n\n".join(report.format_summary(s) for s in sums))
    if args.png:
        from trnsim.viz import plot

        plot(trace_files.read_trace(args.trace, summary=False), args.png)
        print(f"wrote {args.png}")
    return 0


def _configure_diff(p: argparse.ArgumentParser) -> None:
    p.add_argument("before")
    p.add_argument("after")


@command("diff", "compare two recorded traces: kernels (total, per engine, per source line) "
         "or profile_torch steps (per op, per source line: eager vs compiled)", _configure_diff)
def _diff(args: argparse.Namespace) -> int:
    from trnsim import report

    steps = [trace_files.step_summary(p) for p in (args.before, args.after)]
    if any(s is not None for s in steps):  # profile_torch steps (eager and compiled, say)
        if None in steps:
            raise UsageError("one trace is a profile_torch step and the other a trace of "
                             "kernel launches; trnsim diff compares two of a kind")
        print(report.diff_steps(*steps))
        return 0
    a, b = _summaries(args.before), _summaries(args.after)
    if len(a) != len(b):
        print(f"note: {len(a)} launches before, {len(b)} after; comparing pairwise")
    for n, (x, y) in enumerate(zip(a, b, strict=False)):
        print(f"== launch {n}: {x.get('kernel')} -> {y.get('kernel')}")
        print(report.diff(x, y))
    return 0


def _configure_demo(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="out", help="directory for the traces and pictures")
    p.add_argument("--chip", default="trn3")
    p.add_argument("--size", type=int, default=2048,
                   help="matmul M=N=K (multiple of 512); attention uses seq len = size")
    p.add_argument("--no-torch", action="store_true",
                   help="skip the PyTorch training step on the trn device")


@command("demo", "simulate a matmul, attention and a PyTorch training step; write timelines",
         _configure_demo)
def _demo(args: argparse.Namespace) -> int:
    from trnsim.demo import run_demo, run_torch_demo

    cli_checks.check_chip(args.chip)
    if args.size < 512 or args.size % 512:
        raise UsageError(f"--size {args.size}: a positive multiple of 512")
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise UsageError(f"--out '{args.out}' is a file; give a folder")
    with progress("demo"):
        out = run_demo(args.out, args.chip, args.size)
    for line in out:
        print(line)
    if not args.no_torch:
        with progress("demo: torch step"):
            out = run_torch_demo(args.out)
        for line in out:
            print(line)
    return 0
