"""Run one kernel launch on a simulated chip: arguments into HBM, programs on cores, results out."""

from __future__ import annotations

import contextvars
import functools
import inspect
import itertools
import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from trnsim import wide_fp
from trnsim.core import NUMERICS, Device
from trnsim.errors import ConstraintError, KernelError, SimulationWarning
from trnsim.gcpause import gc_paused
from trnsim.hostmem import tune_malloc
from trnsim.nki import liveness
from trnsim.nki.context import KernelContext, activate, deactivate, maybe_current
from trnsim.nki.host_io import (
    HostArgument,
    device_dtype,
    from_host_array,
    guard_writes,
    native,
    to_host_array,
    write_back,
    write_refusal,
)
from trnsim.nki.host_io import is_array_arg as _is_array_arg
from trnsim.nki.host_io import is_torch as _is_torch
from trnsim.nki.lnc import Programs
from trnsim.nki.tensor import NkiTensor, check_ga_outputs
from trnsim.nki.typing import check_annotations
from trnsim.program import Instruction, capture_location
from trnsim.timing.races import find_hidden_hazards, find_races

PLATFORM_ALIASES = {"trn1": "trn1", "inf2": "trn1", "gen2": "trn1", "trn2": "trn2",
                    "gen3": "trn2", "trn3": "trn3", "gen4": "trn3"}
DEFAULT_CHIP = "trn3"


def default_chip_name() -> str:
    """NEURON_PLATFORM_TARGET_OVERRIDE (trn1|inf2|gen2, trn2|gen3, trn3|gen4), else
    NKI_NC_VERSION (gen2|gen3|gen4: the variable AWS's CPU simulator reads), else trn3."""
    for var in ("NEURON_PLATFORM_TARGET_OVERRIDE", "NKI_NC_VERSION"):
        env = os.environ.get(var, "").strip().lower()
        if not env:
            continue
        if env not in PLATFORM_ALIASES:
            raise ConstraintError(f"{var}={env!r} is not a platform "
                                  f"(known: {', '.join(PLATFORM_ALIASES)})", capture_location())
        return PLATFORM_ALIASES[env]
    return DEFAULT_CHIP


def resolve_chip(chip: Any) -> Any:
    if chip is None:
        chip = default_chip_name()
    if isinstance(chip, str):
        from trnsim.chip import load_chip

        return load_chip(PLATFORM_ALIASES.get(chip.lower(), chip))
    return chip


@dataclass
class KernelRun:
    """One launch: what the kernel returned (host arrays), the program record, the chip."""

    outputs: Any
    program: list[Instruction]
    chip: Any
    device: Device
    kernel_name: str = ""
    grid: tuple[int, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)


# Set by `trnsim profile` / recorders: every finished launch is appended to this list.
_RECORDER: contextvars.ContextVar[list[KernelRun] | None] = contextvars.ContextVar(
    "trnsim_recorder", default=None)


# Set by the CLI's progress display: called with the instruction count as a launch runs.
_PROGRESS: contextvars.ContextVar[Callable[[int], None] | None] = contextvars.ContextVar(
    "trnsim_progress", default=None)


def report_progress(callback: Callable[[int], None]) -> contextvars.Token:
    return _PROGRESS.set(callback)


def stop_progress(token: contextvars.Token) -> None:
    _PROGRESS.reset(token)


def record_launches(sink: list[KernelRun]) -> contextvars.Token:
    return _RECORDER.set(sink)


def stop_recording(token: contextvars.Token) -> None:
    _RECORDER.reset(token)


# ---------------------------------------------------------------- host <-> device values


# ---------------------------------------------------------------- device tensors

# Registered once by the PyTorch backend (trnsim.backend) when it creates its device: an
# object with `owns(x) -> bool` (x is one of its device tensors) and
# `launch(kernel, args, kwargs, options) -> KernelRun` (runs the kernel on its HBM with no
# copy: it calls run_kernel(..., hbm=..., host_outputs=False) with the tensors as HBM views).
_DEVICE_ADAPTERS: list[Any] = []


def register_device_adapter(adapter: Any) -> None:
    """Let kernels be called with another layer's device tensors (at most one adapter)."""
    _DEVICE_ADAPTERS[:] = [adapter]


def _device_adapter(args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    if not _DEVICE_ADAPTERS:
        return None
    adapter = _DEVICE_ADAPTERS[0]
    for a in (*args, *kwargs.values()):
        items = a if isinstance(a, (list, tuple)) else (a,)
        if any(adapter.owns(x) for x in items):
            return adapter
    return None


# ---------------------------------------------------------------- launching


def grid_points(grid: Sequence[int]) -> list[tuple[int, ...]]:
    return list(itertools.product(*(range(int(g)) for g in grid))) if grid else [()]


def run_kernel(kernel: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any], *,
               chip: Any = None, lnc: int = 1, grid: Sequence[int] | None = None,
               values: bool = True, generation: str = "ga", seed: int = 0,
               cores_for_grid: int = 1, hbm: Any = None,
               host_outputs: bool = True, onchip_pool: dict | None = None,
               numerics: str = "exact") -> KernelRun:
    """Simulate `kernel(*args, **kwargs)` launched on `grid` (B1) or `lnc` cores (GA).

    Array arguments (numpy or torch CPU) become shared-HBM tensors; the kernel's returned
    tensors come back as host arrays of the same kind, and written inputs are updated in place.
    `hbm`: run on this existing HBM (allocation.HBM of the chip) instead of a fresh one;
    NkiTensor arguments over it are passed as they are. host_outputs=False returns the
    kernel's result as it is (HBM NkiTensors), not as host copies. `onchip_pool`: see
    core.Device (a long-lived device's launches reuse their on-chip byte arrays).
    `numerics`: "exact" (default: machine-independent values) or "fast" (fp32 BLAS for
    nc_matmul; core.NUMERICS).
    """
    if maybe_current() is not None:
        raise KernelError("a kernel launch cannot be nested inside a running kernel "
                          "(call the inner function directly)", capture_location())
    if hbm is None:
        adapter = _device_adapter(args, kwargs)
        if adapter is not None:
            options = {"chip": chip, "lnc": lnc, "grid": grid, "values": values,
                       "generation": generation, "seed": seed, "cores_for_grid": cores_for_grid}
            if numerics != "exact":
                options["numerics"] = numerics
            return adapter.launch(kernel, args, kwargs, options)
    tune_malloc()  # (once per process: trnsim/hostmem.py)
    spec = resolve_chip(chip)
    if lnc not in spec.lnc_allowed and lnc != 1:
        raise ConstraintError(f"kernel[{lnc}]: {spec.name} supports logical NeuronCore configs "
                              f"{', '.join(map(str, spec.lnc_allowed))}", capture_location())
    if generation != "ga" and cores_for_grid > max(spec.lnc_allowed):
        # B1 nl.nc(n) spreads a grid dimension over n physical cores of one logical core
        # (nki-api.md §2.4); the chip's LNC configs bound n.
        raise ConstraintError(f"kernel[nl.nc({cores_for_grid})]: {spec.name} has at most "
                              f"{max(spec.lnc_allowed)} physical NeuronCore(s) per logical core "
                              f"(LNC {', '.join(map(str, spec.lnc_allowed))}; nl.nc(n) spreads a "
                              "grid dimension over n of them, nki-api.md §2.4)",
                              capture_location())
    if numerics not in NUMERICS:
        raise ConstraintError(f"numerics={numerics!r}: allowed {', '.join(map(repr, NUMERICS))}",
                              capture_location())
    grid = tuple(grid) if grid else ((lnc,) if lnc > 1 else ())
    ncores = lnc if generation == "ga" else max(1, cores_for_grid)

    def attempt(plan: liveness.Plan | None) -> tuple[Device, Any, list[HostArgument]]:
        device = Device(spec, values=values, seed=seed, hbm=hbm, onchip_pool=onchip_pool,
                        numerics=numerics)
        device.progress = _PROGRESS.get()
        host: list[HostArgument] = []
        labels = _parameter_names(kernel, len(args))
        try:
            dev_args = [_arg_to_device(device, a, f"arg{i}", labels[i], host)
                        for i, a in enumerate(args)]
            dev_kwargs = {k: _arg_to_device(device, v, k, k, host) for k, v in kwargs.items()}
        except KernelError as e:  # an argument refused: at the line that launched the kernel
            raise e.with_loc(capture_location()) from None
        if values and guard_writes(host):
            device.guarded = True
        check_annotations(kernel, dev_args, dev_kwargs)
        shared: dict[Any, Any] = {}
        contexts = []
        for n, pid in enumerate(grid_points(grid)):
            ctx = KernelContext(device, device.core(n % ncores), pid, grid, generation)
            ctx.extra["shared_allocs"] = shared
            ctx.extra["shared_seq"] = 0
            ctx.extra["liveness"] = plan
            contexts.append(ctx)
        bodies = [functools.partial(_run_program, ctx, kernel, dev_args, dev_kwargs)
                  for ctx in contexts]
        with gc_paused(), wide_fp.launch():
            if len(contexts) > 1 and (generation == "ga" or getattr(kernel, "cooperative", False)):
                # LNC2: the programs run concurrently (core_barrier, sendrecv), one at a time.
                programs = Programs(len(contexts))
                for ctx in contexts:
                    ctx.extra["lnc"] = programs
                result = programs.run(bodies)[-1]
            else:
                result = None
                for body in bodies:
                    result = body()
        return device, result, host

    # A launch from host arrays can run again from its inputs: tiles may then be freed after
    # their last use when memory is full (trnsim.nki.liveness); a miss runs it again.
    outcome = liveness.run_with_plan(attempt) if hbm is None else attempt(None)
    device, result, host = outcome
    with gc_paused():  # these walk the whole record, making short-lived objects only
        if len(device.cores) > 1:
            _warn_races(device.program)
        _warn_hidden_hazards(device.program)
    if generation == "ga":
        check_ga_outputs(result, kernel)
    # Timing-only runs hold no values: a returned tensor of 50 GiB must not be read back.
    if not host_outputs:
        outputs = result
    else:
        outputs = _result_to_host(result, like=_first_torch(args, kwargs)) if values else None
    if values:
        write_back(host)
    run = KernelRun(outputs, device.program, spec, device,
                    getattr(kernel, "__name__", str(kernel)), grid)
    sink = _RECORDER.get()
    if sink is not None:
        sink.append(run)
    return run


_MAX_RACE_WARNINGS = 3


def _warn_races(program: list[Instruction]) -> None:
    """A SimulationWarning per cross-core HBM race (timing/races.py), at the later access's
    line; the first few only, then how many more there are."""
    races = find_races(program)
    for race in races[:_MAX_RACE_WARNINGS]:
        a, b = program[race.first], program[race.second]
        verb = {True: "writes", False: "reads"}
        where = f" at {a.loc.short()}" if a.loc is not None else ""
        more = len(races) - _MAX_RACE_WARNINGS
        what = (f"bytes of HBM tensor '{race.tensor}'" if race.tensor
                else f"HBM bytes [{race.start}, {race.end}) (of an unnamed tensor: "
                     "nl.ndarray(name=...) names it here)")
        text = (
            f"{b.opcode} on core {b.core} {verb[race.second_writes]} {what} that "
            f"{a.opcode}{where} on core {a.core} {verb[race.first_writes]}, "
            "with no core_barrier between them: on hardware the cores run concurrently and the "
            f"result depends on timing (trnsim ran core {a.core}'s access first). Order them "
            "with nisa.core_barrier or make the regions disjoint"
            + (f" ({more} more such pairs)" if more > 0 and race is races[_MAX_RACE_WARNINGS - 1]
               else "")
        )
        if b.loc is not None:
            warnings.warn_explicit(text, SimulationWarning, b.loc.filename, b.loc.lineno)
        else:
            warnings.warn(text, SimulationWarning, stacklevel=3)


def _warn_hidden_hazards(program: list[Instruction]) -> None:
    """A SimulationWarning per one-core HBM hazard the dependency tracker cannot see
    (timing/races.py), at the later access's line; the first few only."""
    hazards = find_hidden_hazards(program)
    for n, h in enumerate(hazards[:_MAX_RACE_WARNINGS]):
        a, b = program[h.first], program[h.second]
        verb = {True: "writes", False: "reads"}
        where = f" at {a.loc.short()}" if a.loc is not None else ""
        what = f"HBM tensor '{h.tensor}'" if h.tensor else "an unnamed HBM tensor"
        more = len(hazards) - _MAX_RACE_WARNINGS
        text = (
            f"{b.opcode} {verb[h.second_writes]} bytes [{h.start}, {h.end}) of {what} that "
            f"{a.opcode}{where} {verb[h.first_writes]}, through access patterns that alias "
            "differently: trnsim's dependency tracker takes them for disjoint, so nothing orders "
            "the two and the timeline may overlap them while values assume program order (on "
            "hardware, a stale read or an out-of-order write). Access the bytes through views "
            "of one shape, or order the two with depends_on / with_schedule"
            + (f" ({more} more such pairs)" if more > 0 and n == _MAX_RACE_WARNINGS - 1 else "")
        )
        if b.loc is not None:
            warnings.warn_explicit(text, SimulationWarning, b.loc.filename, b.loc.lineno)
        else:
            warnings.warn(text, SimulationWarning, stacklevel=3)


def _run_program(ctx: KernelContext, kernel: Callable[..., Any], args: Sequence[Any],
                 kwargs: dict[str, Any]) -> Any:
    token = activate(ctx)
    try:
        return kernel(*args, **kwargs)
    finally:
        deactivate(token)


def _first_torch(args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    for a in (*args, *kwargs.values()):
        if _is_torch(a):
            return a
    return None


def _parameter_names(kernel: Callable[..., Any], n: int) -> list[str]:
    """How messages name the first n positional arguments: the kernel's parameter names (of
    the user's function, for a launcher that records it as `source_fn`)."""
    try:
        fn = getattr(kernel, "source_fn", kernel)
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return [params[i] if i < len(params) else f"arg{i}" for i in range(n)]


def _arg_to_device(device: Device, a: Any, name: str, label: str,
                   host: list[HostArgument]) -> Any:
    """An array argument as a dense row-major HBM tensor of its shape and values (any host
    layout: a device copy is dense)."""
    if not _is_array_arg(a):
        if isinstance(a, (list, tuple)) and any(_is_array_arg(x) for x in a):
            return type(a)(_arg_to_device(device, x, f"{name}_{i}", f"{label}[{i}]", host)
                           for i, x in enumerate(a))
        return a
    arr = to_host_array(a, label)
    values = native(arr)
    view = device.hbm_from_array(values, device_dtype(values, label), name,
                                 f"the HBM copy of kernel argument '{label}'")
    tensor = NkiTensor(view.buffer, view.layout)
    host.append(HostArgument(a, arr, tensor, label, write_refusal(a, arr)))
    return tensor


def _result_to_host(result: Any, like: Any) -> Any:
    if isinstance(result, NkiTensor):
        if result.buffer.space != "hbm":
            raise KernelError(f"kernel returned tensor '{result.name}' in {result.buffer.space}; "
                              "kernel outputs must be HBM tensors (nl.shared_hbm)")
        return from_host_array(result.read(), like)
    if isinstance(result, (tuple, list)):
        return type(result)(_result_to_host(r, like) for r in result)
    if isinstance(result, dict):
        return {k: _result_to_host(v, like) for k, v in result.items()}
    return result
