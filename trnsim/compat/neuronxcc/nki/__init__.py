"""trnsim's implementation of `neuronxcc.nki` (NKI Beta 1), importable as `neuronxcc.nki` under
`trnsim run`, after trnsim.install_nki_aliases() or with `pytest --trnsim`.

Host API: jit (mode=...), simulate_kernel, baremetal, benchmark, profile, trace, the tensor
class, FrameworkKernel, sync_thread; submodules language, isa, compiler, typing, errors.
Every mode runs on the simulated chip (there is no device); benchmark and profile report the
timing model's estimate. Differences from the B1 toolchain are listed in
trnsim/compat/neuronxcc/nki/NOTES.md.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trnsim import dtypes as _dt
from trnsim.compat.neuronxcc.nki import compiler, errors, isa, language, typing
from trnsim.compat.neuronxcc.nki._kernel import BenchmarkResult, Kernel, Latency
from trnsim.compat.neuronxcc.nki._tensor import tensor


def _decorator(mode: str, fn: Any, options: dict[str, Any]) -> Any:
    def wrap(f: Any) -> Kernel:
        if isinstance(f, Kernel):
            return Kernel(f.fn, mode, f.grid, f.cores, {**f.options, **options})
        if not callable(f):
            raise TypeError(f"nki.{mode}: expected a kernel function, got {type(f).__name__}")
        return Kernel(f, mode, (), 1, options)

    return wrap(fn) if fn is not None else wrap


def jit(func: Any = None, mode: str = "auto", **kwargs: Any) -> Any:
    """@nki.jit / nki.jit(mode=...): a kernel. Called with NumPy arrays (or torch CPU tensors)
    it runs on the simulated chip in every mode ('auto', 'simulation', 'baremetal', 'jax',
    'torchxla'; 'benchmark' also times it; 'trace' marks a sub-kernel). Options:
    platform_target='trn1'|'trn2'|'trn3' (or chip=), seed=."""
    return _decorator(mode, func, kwargs)


def trace(func: Any = None, **kwargs: Any) -> Any:
    """nki.trace: a kernel traced into its caller (a sub-kernel); alone it runs like jit."""
    return _decorator("trace", func, kwargs)


def baremetal(kernel: Any = None, **kwargs: Any) -> Any:
    """nki.baremetal: run a kernel with NumPy I/O (here: on the simulated chip). NEFF/NTFF
    options (save_neff_name, save_trace_name, additional_compile_opt, artifacts_dir) are
    accepted and ignored."""
    return _decorator("baremetal", kernel, kwargs)


def benchmark(kernel: Any = None, warmup: int = 10, iters: int = 100, **kwargs: Any) -> Any:
    """nki.benchmark: run the kernel and time it with trnsim's timing model; afterwards
    `fn.benchmark_result.nc_latency.get_latency_percentile(p)` gives the simulated latency in
    microseconds (all percentiles equal: the simulation is deterministic). Arguments may be
    arrays or abstract nt.tensor[[shape], dtype] types (then only timing is simulated)."""
    return _decorator("benchmark", kernel, {"warmup": warmup, "iters": iters, **kwargs})


def profile(
    func: Any = None,
    working_directory: Any = None,
    save_neff_name: Any = None,
    save_trace_name: Any = None,
    additional_compile_opt: Any = None,
    overwrite: bool = False,
    profile_nth: int = 1,
    **kwargs: Any,
) -> Any:
    """nki.profile: run and time the kernel; with working_directory, write the simulated
    timeline there as <save_trace_name stem>.json (Perfetto) plus a summary sidecar. The
    Profile is left on `fn.profile_result`."""
    options = {
        "working_directory": working_directory,
        "save_trace_name": save_trace_name,
        "overwrite": overwrite,
        **kwargs,
    }
    return _decorator("profile", func, options)


def simulate_kernel(kernel: Any, *args: Any, **kwargs: Any) -> Any:
    """Run a kernel (function, jit kernel or kernel[grid]) on the simulated chip with NumPy
    arrays; returns its outputs as NumPy arrays. nl.device_print prints here."""
    if isinstance(kernel, Kernel):
        k = Kernel(kernel.fn, "simulation", kernel.grid, kernel.cores, kernel.options)
    else:
        k = Kernel(kernel, "simulation")
    return k.launch(args, kwargs).outputs


def sync_thread(*args: Any, **kwargs: Any) -> None:
    """Wait for asynchronous collectives (nl.all_reduce(asynchronous=True)); the simulator
    completes them synchronously, so there is nothing to wait for."""
    return None


class FrameworkKernel:
    """Base class of framework integrations: maps framework tensors to NKI tensor types."""

    def dump_config(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The kernel configuration as a dict (nothing to compile here)."""
        return {"class": type(self).__name__}

    def is_framework_tensor(self, t: Any) -> bool:
        return isinstance(t, np.ndarray) or type(t).__module__.startswith("torch")

    def map_framework_tensor(self, t: Any) -> tuple[tuple[int, ...], Any]:
        """(shape, NKI dtype) of a framework tensor."""
        return tuple(t.shape), self.translate_to_neuron_dtype(t.dtype)

    def translate_to_neuron_dtype(self, dtype: Any) -> Any:
        return _dt.resolve(dtype)


__all__ = [
    "BenchmarkResult",
    "FrameworkKernel",
    "Kernel",
    "Latency",
    "baremetal",
    "benchmark",
    "compiler",
    "errors",
    "isa",
    "jit",
    "language",
    "profile",
    "simulate_kernel",
    "sync_thread",
    "tensor",
    "trace",
    "typing",
]
