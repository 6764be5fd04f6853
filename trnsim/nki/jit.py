"""Kernel entry points of the current API: nki.jit, nki.simulate, nki.cpu_simulate."""

from __future__ import annotations

import contextvars
import functools
import os
import warnings
from collections.abc import Callable
from typing import Any

from trnsim.chip import ALIASES
from trnsim.errors import ConfigTypeError, ConstraintError, SimulationWarning
from trnsim.nki.compiler.config import CompileConfig, SpecializationConfig
from trnsim.nki.context import maybe_current
from trnsim.nki.runner import _is_array_arg, run_kernel
from trnsim.program import capture_location

# The running top-level kernel's (compile_config, specialization_config), for nested kernels.
_OUTER: contextvars.ContextVar[tuple[Any, Any] | None] = contextvars.ContextVar(
    "trnsim_outer_kernel_config", default=None)


def launching_config() -> Any:
    """The compile config of the nki.jit kernel being launched (None outside a launch or
    without one): what a device adapter's launch (trnsim/backend) times it with."""
    outer = _OUTER.get()
    return None if outer is None else outer[0]


class Kernel:
    """A kernel function plus its launch configuration (`kernel[lnc]` / `kernel[d0, d1]`) and
    its nki.compiler configuration (compile_config / specialization_config, or None)."""

    def __init__(self, fn: Callable[..., Any], grid: tuple[int, ...] = (),
                 options: dict | None = None, generation: str = "ga",
                 compile_config: CompileConfig | None = None,
                 specialization_config: SpecializationConfig | None = None):
        self.fn = fn
        self.grid = grid
        self.options = dict(options or {})
        self.generation = generation
        self.compile_config = compile_config
        self.specialization_config = specialization_config
        functools.update_wrapper(self, fn)

    def _copy(self, grid: tuple[int, ...]) -> Kernel:
        return type(self)(self.fn, grid, self.options, self.generation, self.compile_config,
                          self.specialization_config)

    def __getitem__(self, grid: Any) -> Kernel:
        grid = grid if isinstance(grid, tuple) else (grid,)
        if self.generation == "ga" and (len(grid) != 1 or not isinstance(grid[0], int)
                                        or grid[0] < 1):
            raise ConstraintError(f"kernel[{', '.join(map(str, grid))}]: the launch takes one "
                                  "logical NeuronCore count (kernel[1] or kernel[2])",
                                  capture_location())
        return self._copy(grid)

    @property
    def lnc(self) -> int:
        return int(self.grid[0]) if self.generation == "ga" and self.grid else 1

    def with_schedule(self, edges: Any) -> Kernel:
        """Scheduling edges between named instructions: [(consumer, producer_or_list), ...].

        Each instruction issued with name=consumer waits for the latest earlier instruction
        issued with each producer name (same core). Values are unaffected; timing honours them.
        """
        k = self._copy(self.grid)
        k.schedule = [*getattr(self, "schedule", []), *_normalize_edges(edges)]
        return k

    def launch(self, args: tuple, kwargs: dict, **run_options: Any) -> Any:
        opts = {**self.options, **run_options}
        token = _OUTER.set((self.compile_config, self.specialization_config))
        try:
            if self.generation == "ga":
                run = run_kernel(self.fn, args, kwargs, lnc=self.lnc, generation="ga", **opts)
            else:
                run = run_kernel(self.fn, args, kwargs, grid=self.grid,
                                 generation=self.generation, **opts)
        finally:
            _OUTER.reset(token)
        _apply_schedule(run.program, getattr(self, "schedule", []))
        if self.compile_config is not None:
            # trnsim.timing.profile.time_run reads it: the order and allocation it times.
            run.extra["compile_config"] = self.compile_config
        return run

    def _check_nested(self) -> None:
        """A sub-kernel inlines under the top-level kernel's configuration: one that sets a
        different compile config is an error, a warning when the top-level kernel's
        SpecializationConfig(allow_nested_config_override=True) allows it."""
        if self.compile_config is None:
            return
        outer_cc, outer_sc = _OUTER.get() or (None, None)
        if self.compile_config == (outer_cc or CompileConfig()):
            return
        name = getattr(self.fn, "__name__", "kernel")
        msg = (f"Kernel '{name}' is called from inside another kernel but sets compile config "
               f"{self.compile_config.changed()} (the calling kernel's: "
               f"{(outer_cc or CompileConfig()).changed()}); a sub-kernel is inlined under the "
               "top-level kernel's config: remove compile_config= from the sub-kernel, or set "
               "specialization_config=SpecializationConfig(allow_nested_config_override=True) "
               "on the top-level kernel")
        if outer_sc is not None and outer_sc.allow_nested_config_override:
            loc = capture_location()
            where = f"{loc.describe()}\n" if loc is not None else ""
            warnings.warn(SimulationWarning(f"{where}{msg}; it is inlined under the top-level "
                                            "kernel's config"), stacklevel=3)
            return
        raise ConstraintError(msg, capture_location())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if maybe_current() is not None:
            # A kernel called from inside another kernel is a sub-kernel: just call it.
            self._check_nested()
            return self.fn(*args, **kwargs)
        if not any(_is_array_arg(a) for a in (*args, *kwargs.values())) and not args and \
                not kwargs:
            return self.launch(args, kwargs).outputs
        return self.launch(args, kwargs).outputs


def _normalize_edges(edges: Any) -> list[tuple[str, tuple[str, ...]]]:
    out = []
    for edge in edges:
        if not isinstance(edge, (tuple, list)) or len(edge) != 2:
            raise ConstraintError(f"with_schedule: each edge is (consumer, producer or list of "
                                  f"producers), got {edge!r}", capture_location())
        consumer, producers = edge
        prods = (producers,) if isinstance(producers, str) else tuple(producers)
        out.append((str(consumer), tuple(str(p) for p in prods)))
    return out


def _apply_schedule(program: list, edges: list[tuple[str, tuple[str, ...]]]) -> None:
    if not edges:
        return
    last: dict[tuple[int, str], int] = {}
    wanted = {c: p for c, p in edges}
    for ins in program:
        if ins.name in wanted:
            extra = [last[(ins.core, p)] for p in wanted[ins.name] if (ins.core, p) in last]
            if extra:
                ins.deps = tuple(sorted({*ins.deps, *extra}))
        if ins.name:
            last[(ins.core, ins.name)] = ins.index


def jit(fn: Callable[..., Any] | None = None, **options: Any) -> Any:
    """@nki.jit: make a kernel. Called with numpy arrays or torch CPU tensors it is simulated
    (as AWS's simulator does under NKI_SIMULATOR=1; there is no device to run it on here)."""
    options.pop("mode", None)  # GA ignores mode=
    target = options.pop("platform_target", None)
    compile_config = _config_option(options, "compile_config", CompileConfig)
    specialization_config = _config_option(options, "specialization_config",
                                           SpecializationConfig)
    run_opts = {k: options.pop(k) for k in ("chip", "values", "seed", "numerics")
                if k in options}
    if target is not None and "chip" not in run_opts:
        # NKI 0.3.0 refused platform_target=; later GA releases take it again (jit(fn=None,
        # **kwargs)), and AWS's current trn3 tutorials pass it (nki-samples' MX matmul:
        # @nki.jit(platform_target="trn3")): it names the chip, as in Beta 1.
        run_opts["chip"] = _platform_target(target)

    def wrap(f: Callable[..., Any]) -> Kernel:
        if isinstance(f, Kernel):  # jit(compile_config=...)(kernel): that config on it
            if compile_config is None and specialization_config is None:
                return f
            k = f._copy(f.grid)
            k.compile_config = compile_config or f.compile_config
            k.specialization_config = specialization_config or f.specialization_config
            return k
        return Kernel(f, (), run_opts, "ga", compile_config, specialization_config)

    return wrap(fn) if fn is not None else wrap


def _config_option(options: dict, name: str, cls: type) -> Any:
    value = options.pop(name, None)
    if value is not None and not isinstance(value, cls):
        raise ConfigTypeError(f"nki.jit: {name} must be an nki.compiler.{cls.__name__} (from "
                              f"nki.compiler import {cls.__name__}), got {value!r} "
                              f"({type(value).__name__})", capture_location())
    return value


def _platform_target(target: Any) -> str:
    """The chip a jit(platform_target=) names: trn1|inf2|gen2, trn2|gen3, trn3|gen4."""
    name = str(target).strip().lower() if isinstance(target, str) else None
    name = ALIASES.get(name, name)
    if name not in ("trn1", "trn2", "trn3"):
        raise ConstraintError(f"nki.jit: platform_target={target!r} is not a target; allowed: "
                              "trn1 (inf2, gen2), trn2 (gen3), trn3 (gen4)", capture_location())
    return name


def simulator_enabled() -> bool:
    return os.environ.get("NKI_SIMULATOR", "").strip() not in ("", "0", "false", "False")


def _as_kernel(kernel: Any) -> Kernel:
    if isinstance(kernel, Kernel):
        return kernel
    if callable(kernel):
        return Kernel(kernel, (), {}, "ga")
    raise ConstraintError(f"expected a kernel function, got {type(kernel).__name__}",
                          capture_location())


def simulate(kernel: Any, **options: Any) -> Callable[..., Any]:
    """nki.simulate(kernel)(*arrays): run on the simulated chip, return host arrays.

    `kernel` may be a plain function, an @nki.jit kernel or a launched `kernel[2]`.
    Options: chip= (default from NEURON_PLATFORM_TARGET_OVERRIDE, else trn3), values=, seed=,
    numerics= ("exact" or "fast": core.NUMERICS).
    """
    k = _as_kernel(kernel)

    def run(*args: Any, **kwargs: Any) -> Any:
        return k.launch(args, kwargs, **options).outputs

    functools.update_wrapper(run, k.fn)
    return run


class _CpuSimulate:
    """nki.cpu_simulate(kernel)[lnc](**inputs): the entry that CPU-simulator harnesses call."""

    def __init__(self, kernel: Any, options: dict[str, Any]):
        self.kernel = _as_kernel(kernel)
        self.options = options

    def __getitem__(self, lnc: int) -> Callable[..., Any]:
        return simulate(self.kernel[lnc], **self.options)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return simulate(self.kernel, **self.options)(*args, **kwargs)


def cpu_simulate(kernel: Any, **options: Any) -> _CpuSimulate:
    return _CpuSimulate(kernel, options)
