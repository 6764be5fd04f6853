"""Beta-1 kernel entry points: nki.jit (mode=...), nki.simulate_kernel, nki.baremetal,
nki.benchmark, nki.profile, nki.trace, and SPMD launches `kernel[d0, d1, ...](...)`.

There is no device here, so every mode runs the kernel on the simulated chip
(trnsim.nki.runner.run_kernel, generation "beta1"): numpy (or torch CPU) arrays in, host arrays
out. The default chip is trn2 (the newest Beta-1 target) unless `platform_target=` or
NEURON_PLATFORM_TARGET_OVERRIDE says otherwise. benchmark and profile also time the run with
trnsim's timing model; their latencies are simulated estimates, not measurements.

Kernel parameters are immutable unless annotated `nt.mutable_tensor` (B1 2.20.1+, kernels that
return their outputs); a kernel that returns nothing is run in the older pass-by-reference
style, where writing an argument is how results come back.
"""

from __future__ import annotations

import ast
import functools
import inspect
import linecache
import math
import os
import textwrap
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from trnsim import dtypes as dt
from trnsim.compat.neuronxcc.nki import _placement, _spill, _spmd
from trnsim.compat.neuronxcc.nki._annotations import with_checked_annotations
from trnsim.compat.neuronxcc.nki._collective import uses_all_reduce
from trnsim.compat.neuronxcc.nki._errors import b1_error
from trnsim.compat.neuronxcc.nki._state import state_of
from trnsim.compat.neuronxcc.nki._tensor import tensor
from trnsim.compat.neuronxcc.nki.typing import TensorType
from trnsim.errors import ConstraintError, KernelError, RuntimeIndexError, SimulationWarning
from trnsim.nki.context import current, maybe_current
from trnsim.nki.jit import Kernel as GAKernel
from trnsim.nki.runner import KernelRun, grid_points, run_kernel
from trnsim.nki.tensor import NkiTensor
from trnsim.program import SourceLocation, capture_location

MODES = ("auto", "simulation", "baremetal", "benchmark", "profile", "trace", "jax", "torchxla")
DEFAULT_B1_CHIP = "trn2"
PERCENTILES = (0, 1, 10, 25, 50, 90, 99, 100)


def default_chip(options: dict[str, Any]) -> Any:
    chip = options.get("chip") or options.get("platform_target")
    if chip is None:
        chip = os.environ.get("NEURON_PLATFORM_TARGET_OVERRIDE", "").strip() or DEFAULT_B1_CHIP
    return chip


class Latency:
    """benchmark_result.nc_latency: latency percentiles in microseconds. The simulation is
    deterministic, so every percentile is the same simulated latency."""

    def __init__(self, latency_us: float, iters: int):
        self.latency_us = float(latency_us)
        self.iters = int(iters)

    def get_latency_percentile(self, p: int) -> float:
        if not 0 <= p <= 100:
            raise ValueError(
                f"percentile {p} is outside [0, 100] (NKI reports "
                f"{', '.join(map(str, PERCENTILES))})"
            )
        return self.latency_us


class BenchmarkResult:
    """What nki.benchmark leaves on the kernel object after a call."""

    def __init__(self, latency_us: float, iters: int, profile: Any):
        self.nc_latency = Latency(latency_us, iters)
        self.profile = profile


class Kernel(GAKernel):
    """A B1 kernel: the function, its launch grid and its mode. It is a current-API Kernel of
    generation "beta1", so trnsim.profile(kernel, *args) times it too."""

    # launch(rules=CompilerRules): refetch_clean_blocks (_refetch), evict_by_next_use (_nextuse)
    takes_compiler_rules = True

    def __init__(
        self,
        fn: Callable[..., Any],
        mode: str = "auto",
        grid: tuple[int, ...] = (),
        cores: int = 1,
        options: dict[str, Any] | None = None,
    ):
        if mode not in MODES:
            raise ConstraintError(
                f"nki.jit: mode={mode!r} is not a mode (known: {', '.join(MODES)})",
                capture_location(),
            )
        self.fn = fn
        self.generation = "beta1"
        self.mode = mode
        self.grid = tuple(grid)
        self.cores = cores
        self.options = dict(options or {})
        self.benchmark_result: BenchmarkResult | None = None
        self.profile_result: Any = None
        functools.update_wrapper(self, fn)

    @functools.cached_property
    def _body(self) -> Callable[..., Any]:
        return with_checked_annotations(self.fn)

    def __getitem__(self, key: Any) -> Kernel:
        grid, cores = _spmd.grid_of(key)
        return Kernel(self.fn, self.mode, grid, cores, self.options)

    def __repr__(self) -> str:
        grid = f"[{', '.join(map(str, self.grid))}]" if self.grid else ""
        return f"<neuronxcc.nki kernel {getattr(self.fn, '__name__', '?')}{grid} ({self.mode})>"

    # ------------------------------------------------------------ calling
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if maybe_current() is not None:
            if self.grid:
                name = getattr(self.fn, "__name__", "kernel")
                raise b1_error(
                    KernelError,
                    "err_nested_kernel_with_spmd_grid",
                    f"calling {name}[{', '.join(map(str, self.grid))}]() inside "
                    "another kernel is not supported (call it without a grid)",
                    capture_location(),
                )
            return self.fn(*args, **kwargs)  # a sub-kernel (mode="trace")
        if self.mode == "benchmark":
            return self._benchmark(args, kwargs)
        if self.mode == "profile":
            return self._profile(args, kwargs)
        return self.launch(args, kwargs).outputs

    def launch(self, args: tuple, kwargs: dict, **overrides: Any) -> KernelRun:
        """Run the launch on the simulated chip; returns the KernelRun record."""
        opts = {**self.options, **overrides}
        abstract = any(isinstance(a, TensorType) for a in (*args, *kwargs.values()))
        values = opts.get("values", not abstract)
        args = tuple(_concrete(a) for a in args)
        kwargs = {k: _concrete(v) for k, v in kwargs.items()}
        # trnsim.profile(rules=CompilerRules(...)): the rules the allocation applies
        refetch = getattr(opts.get("rules"), "refetch_clean_blocks", True)
        next_use = getattr(opts.get("rules"), "evict_by_next_use", True)

        def attempt(placement: _placement.Placement) -> KernelRun:
            def entry(*dev_args: Any, **dev_kwargs: Any) -> Any:
                state_of(current("neuronxcc.nki kernel")).placement = placement
                return _program(self, *dev_args, **dev_kwargs)

            entry.__name__ = entry.__qualname__ = getattr(self.fn, "__name__", "kernel")
            entry.cooperative = uses_all_reduce(self.fn)  # type: ignore[attr-defined]
            entry.source_fn = self.fn  # type: ignore[attr-defined]  # messages name parameters
            return run_kernel(
                entry,
                args,
                kwargs,
                chip=default_chip(opts),
                grid=self.grid or None,
                values=values,
                generation="beta1",
                seed=int(opts.get("seed", 0)),
                cores_for_grid=self.cores,
            )

        try:
            programs = math.prod(self.grid) if self.grid else 1
            return _placement.placed_launch(attempt, refetch, next_use, programs)
        except RuntimeIndexError as e:
            # B1's simulator raises numpy's own IndexError for an out-of-bounds indirect
            # index under oob_mode.error (the dma_copy docs' example asserts that type and
            # text); trnsim's description stays attached as a note and as the cause.
            err = IndexError(e.index_text)
            err.add_note(str(e))
            raise err from e

    def _timed(self, args: tuple, kwargs: dict) -> Any:
        """Run and time the launch with trnsim.profile (outputs on the Profile)."""
        import trnsim

        abstract = any(isinstance(a, TensorType) for a in (*args, *kwargs.values()))
        values = self.options.get("values", not abstract)
        return trnsim.profile(self, *args, chip=default_chip(self.options), values=values, **kwargs)

    def _benchmark(self, args: tuple, kwargs: dict) -> Any:
        prof = self._timed(args, kwargs)
        iters = int(self.options.get("iters", 100))
        self.benchmark_result = BenchmarkResult(prof.latency_ns / 1000.0, iters, prof)
        return prof.outputs

    def _profile(self, args: tuple, kwargs: dict) -> Any:
        prof = self._timed(args, kwargs)
        self.profile_result = prof
        workdir = self.options.get("working_directory")
        name = self.options.get("save_trace_name") or "profile.ntff"
        if workdir is not None:
            os.makedirs(workdir, exist_ok=True)
            path = os.path.join(os.fspath(workdir), os.path.splitext(str(name))[0] + ".json")
            if os.path.exists(path) and not self.options.get("overwrite", False):
                raise ConstraintError(
                    f"nki.profile: {path} exists (pass overwrite=True)", capture_location()
                )
            prof.save(path, getattr(self.fn, "__name__", ""))
        return prof.outputs


def _concrete(a: Any) -> Any:
    """An abstract nt.tensor[[shape], dtype] argument as an uninitialized host array."""
    if isinstance(a, TensorType):
        if a.shape is None or a.dtype is None:
            raise ConstraintError(
                f"abstract argument {a!r} needs a shape and a dtype "
                "(nt.tensor[[P, F], nl.float32])",
                capture_location(),
            )
        d = dt.resolve(a.dtype)
        return np.zeros(tuple(int(s) for s in a.shape), dtype=d.storage)
    return a


# ---------------------------------------------------------------- one program


def _annotations(fn: Callable[..., Any]) -> dict[str, Any]:
    try:
        return inspect.get_annotations(fn, eval_str=True)
    except Exception:
        return dict(getattr(fn, "__annotations__", {}) or {})


def _program(kernel: Kernel, *dev_args: Any, **dev_kwargs: Any) -> Any:
    """One SPMD program: wrap arguments as B1 tensors, run, check the B1 output rules."""
    ctx = current("neuronxcc.nki kernel")
    st = state_of(ctx)
    fn = kernel.fn
    anns = _annotations(fn)
    try:
        bound = inspect.signature(fn).bind(*dev_args, **dev_kwargs)
    except TypeError as e:
        raise KernelError(f"{getattr(fn, '__name__', 'kernel')}: {e}", capture_location()) from None
    mutable: dict[int, str] = {}
    for name, value in list(bound.arguments.items()):
        ann = anns.get(name)
        wrapped = _wrap(value, name)
        if isinstance(ann, TensorType):
            ann.check(wrapped, name, def_loc(fn))
        for t in _tensors(wrapped):
            if isinstance(ann, TensorType) and ann.mutable:
                mutable[id(t._buf)] = name
            else:
                st.immutable[id(t._buf)] = name
        bound.arguments[name] = wrapped
    result = kernel._body(*bound.args, **bound.kwargs)
    st.flush()
    _spill.finish(ctx, st.placement)
    _check_outputs(ctx, st, result, mutable, def_loc(fn), fn, kernel.mode == "simulation")
    return _unwrap(result, ctx)


def _wrap(value: Any, name: str) -> Any:
    if isinstance(value, NkiTensor):
        if not value.buffer.name or value.buffer.name.startswith("arg"):
            value.buffer.name = name
        return tensor.from_view(value)
    if isinstance(value, (list, tuple)) and any(isinstance(v, NkiTensor) for v in value):
        return type(value)(_wrap(v, f"{name}[{i}]") for i, v in enumerate(value))
    return value


def _tensors(value: Any) -> list[tensor]:
    if isinstance(value, tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    return []


def _unwrap(result: Any, ctx: Any) -> Any:
    if isinstance(result, tensor):
        result._ready()
        view = NkiTensor(result._buf, result.layout())
        if result._buf is None or result._buf.space == "hbm":
            return view
        # A returned tile (see _check_outputs): its values as they are at the end of the
        # kernel, in a host-side HBM tensor (no instruction: nothing for the timing model).
        out = ctx.device.allocate_hbm(view.shape, view.dtype, result.name or "tile_output")
        if ctx.device.values:
            out.write(view.read())
        return NkiTensor(out.buffer, out.layout)
    if isinstance(result, (list, tuple)):
        return type(result)(_unwrap(r, ctx) for r in result)
    if isinstance(result, dict):
        return {k: _unwrap(v, ctx) for k, v in result.items()}
    return result


def def_loc(fn: Callable[..., Any]) -> SourceLocation | None:
    """The kernel's `def` line (where errors about its signature and outputs point)."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    line = code.co_firstlineno
    text = linecache.getline(code.co_filename, line).strip()
    while text.startswith("@"):
        line += 1
        text = linecache.getline(code.co_filename, line).strip()
    return SourceLocation(code.co_filename, line, code.co_name, text)


def return_loc(fn: Any, loc: SourceLocation | None) -> SourceLocation | None:
    """The kernel's `return` line when it has exactly one (else `loc`, its def line)."""
    if loc is None:
        return loc
    try:
        lines, start = inspect.getsourcelines(fn)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        return loc
    body = tree.body[0] if tree.body else None
    if not isinstance(body, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return loc
    returns = [n for n in ast.walk(body) if isinstance(n, ast.Return) and n.value is not None]
    if len(returns) != 1:
        return loc
    line = start + returns[0].lineno - 1
    text = linecache.getline(loc.filename, line).strip()
    return SourceLocation(loc.filename, line, loc.function, text)


def _check_outputs(
    ctx: Any,
    st: Any,
    result: Any,
    mutable: dict[int, str],
    loc: SourceLocation | None,
    fn: Any = None,
    simulation: bool = False,
) -> None:
    for t in _tensors(result):
        if t._buf is not None and t._buf.space != "hbm":
            # The B1 known issues say top-level outputs must be in HBM for the compiler
            # ("we currently do not support using tensors stored in SBUF or PSUM as the ...
            # output of the top-level kernel"); AWS's simulator (mode="simulation",
            # nki.simulate_kernel) returns the tile's values (its own range_select example
            # does), so trnsim does too there, and warns.
            at = return_loc(fn, loc)
            if not simulation:
                raise KernelError(
                    f"kernel returned `{t.name or '?'}`, a tile in {t._buf.space}; kernel "
                    "outputs must be HBM tensors (NKI known issues: top-level tensors must be "
                    "on HBM): create one with nl.ndarray(..., buffer=nl.shared_hbm), nl.store "
                    "the tile into it and return that",
                    at,
                )
            message = (
                f"kernel returned `{t.name or '?'}`, a tile in {t._buf.space}: simulated, its "
                "values are returned, but the compiler supports only HBM kernel outputs (NKI "
                "known issues); nl.store the tile into an nl.shared_hbm tensor and return that"
            )
            if at is None:
                warnings.warn(message, SimulationWarning, stacklevel=2)
            else:
                warnings.warn_explicit(message, SimulationWarning, at.filename, at.lineno)
    returned = {id(t._buf) for t in _tensors(result) if t._buf is not None}
    strict = result is not None or bool(mutable)
    if strict and st.immutable_writes:
        name, loc = st.immutable_writes[0]
        raise b1_error(
            KernelError,
            "err_cannot_update_immutable_parameter",
            f"Cannot update immutable parameter `{name}` (annotate it as "
            f"`{name}: nt.mutable_tensor` and return it)",
            loc,
        )
    missing = [n for b, n in mutable.items() if b not in returned]
    if missing:
        raise b1_error(
            KernelError,
            "err_mutable_parameter_not_returned",
            f"{', '.join(missing)}: mutable kernel parameter not returned (a "
            "nt.mutable_tensor parameter must be in the return value)",
            loc,
        )
    shared = ctx.extra["shared_allocs"]
    written = shared.setdefault("b1_written", set())
    written.update(id(b) for b in st.hbm_written)
    last = grid_points(ctx.grid)[-1] if ctx.grid else ()
    if tuple(ctx.program_id) != tuple(last):
        return
    for t in _tensors(result):
        buf = t._buf
        if buf is None or buf.space != "hbm" or id(buf) in mutable or id(buf) in st.immutable:
            continue
        if id(buf) not in written:
            raise b1_error(
                KernelError,
                "err_tensor_output_not_written_to",
                f"`{buf.name or '?'}` is returned but never written to (store into "
                "it before returning it)",
                loc,
            )
