"""nki.compiler: the per-kernel compile configuration, and AWS's compiler driver (NEFF
compilation, the kernel builder, MLIR dialects).

trnsim runs kernels without compiling them. Two parts run: the configuration kernels pass to
`nki.jit` (CompileConfig, SpecializationConfig and their enums: compiler/config.py, which
checks them as documented and gives them their timing meaning), and `nki.compiler.frontend`,
which traces a kernel on the simulated chip (trnsim's tracer is its frontend; nki-library's
simulation harness imports it by path). The rest (`ncc_driver`, `kernel_builder`, `target`, and
any other name looked up here) raises UnsupportedError naming what does run a kernel.
"""

from __future__ import annotations

import importlib
from typing import Any

from trnsim.errors import UnsupportedError
from trnsim.nki.compiler.config import (  # noqa: F401  (the public configuration names)
    AddressRotation,
    Allocation,
    AllocationMode,
    CompileConfig,
    OptLevel,
    SchedulingHeuristic,
    SpecializationConfig,
)
from trnsim.program import capture_location

__trnsim_unsupported__ = True  # `trnsim coverage`: the path imports, nothing in it runs

_SUBMODULES = ("frontend", "ncc_driver", "kernel_builder", "target")


def refusal(what: str) -> UnsupportedError:
    return UnsupportedError(
        f"{what}: AWS's NKI compiler (NEFF compilation) is not part of trnsim (kernels are "
        "simulated, not compiled); run a kernel with nki.jit, nki.simulate or nki.cpu_simulate, "
        "or trace it with nki.compiler.frontend.ParserFrontend().compile(kernel, inputs=...)",
        capture_location())


def unsupported_getattr(module: str):
    """A module-level __getattr__ that refuses every public name of `module`."""

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise refusal(f"{module}.{name}")

    return __getattr__


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:  # `from nki.compiler import frontend`
        return importlib.import_module(f"{__name__}.{name}")
    if name.startswith("__"):
        raise AttributeError(name)
    raise refusal(f"nki.compiler.{name}")
