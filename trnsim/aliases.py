"""Make `import nki`, `import neuronxcc.nki`, `import neuron_dtypes` (and, for nki-library's
harness, `import nki_cpu_simulator`) resolve to trnsim where no real package is installed."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import ModuleType

# alias prefix -> trnsim module implementing it
ALIASES = {"nki": "trnsim.nki", "neuronxcc": "trnsim.compat.neuronxcc",
           "neuron_dtypes": "trnsim.compat.neuron_dtypes"}
# AWS's CPU simulator package, as nki-library's harness imports it (trnsim.compat.nki_cpu_simulator)
HARNESS_ALIASES = {"nki_cpu_simulator": "trnsim.compat.nki_cpu_simulator",
                   "nki_cpu_simulator.nki": "trnsim.nki"}


class _AliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves `nki.x.y` as the already-imported `trnsim.nki.x.y` module object."""

    def __init__(self, prefixes: dict[str, str]):
        self.prefixes = prefixes

    def _target(self, fullname: str) -> str | None:
        """The trnsim module for `fullname`; the longest matching alias prefix wins."""
        best = None
        for alias in self.prefixes:
            if (fullname == alias or fullname.startswith(alias + ".")) and (
                best is None or len(alias) > len(best)
            ):
                best = alias
        return None if best is None else self.prefixes[best] + fullname[len(best) :]

    def find_spec(self, fullname, path=None, target=None):
        real = self._target(fullname)
        if real is None:
            return None
        try:
            importlib.util.find_spec(real)
        except ModuleNotFoundError:
            return None
        if importlib.util.find_spec(real) is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        return importlib.import_module(self._target(spec.name))

    def exec_module(self, module: ModuleType) -> None:
        return None


def _real_installation(alias: str) -> bool:
    """True if a non-trnsim package of that name is importable."""
    if alias in sys.modules:
        mod = sys.modules[alias]
        return not (getattr(mod, "__name__", "").startswith("trnsim"))
    try:
        spec = importlib.util.find_spec(alias)
    except (ImportError, ValueError):
        return False
    return spec is not None and not isinstance(spec.loader, _AliasFinder)


def install_nki_aliases(force: bool = False) -> list[str]:
    """Make `nki`, `neuronxcc.nki` and `neuron_dtypes` import trnsim's implementations.

    A real installation of any of them is left alone unless force=True, and `neuron_dtypes`
    is served only beside trnsim's nki (never under a real one). Returns the aliases installed.
    """
    chosen = {}
    for alias, real in ALIASES.items():
        if not force and _real_installation(alias):
            continue
        try:
            if importlib.util.find_spec(real) is None:
                continue
        except ModuleNotFoundError:
            continue
        if alias == "neuron_dtypes" and not force and not ({"nki", "neuronxcc"} & set(chosen)):
            continue  # AWS's dtypes beside a real nki stay theirs: no mixed installation
        chosen[alias] = real
        if force:
            for name in [m for m in sys.modules if m == alias or m.startswith(alias + ".")]:
                if not sys.modules[name].__name__.startswith("trnsim"):
                    del sys.modules[name]
    for f in sys.meta_path:
        if isinstance(f, _AliasFinder):
            f.prefixes.update(chosen)
            break
    else:
        sys.meta_path.insert(0, _AliasFinder(chosen))
    return sorted(chosen)


def _add_prefixes(chosen: dict[str, str]) -> None:
    for f in sys.meta_path:
        if isinstance(f, _AliasFinder):
            f.prefixes.update(chosen)
            return
    sys.meta_path.insert(0, _AliasFinder(chosen))


def install_harness_aliases() -> list[str]:
    """Make `import nki_cpu_simulator.nki...` (AWS's CPU simulator, as nki-library's simulation
    harness imports it) serve trnsim's modules where no real nki_cpu_simulator is installed.
    Lazy: nothing is imported until a script imports it (trnsim's pytest plugin calls this)."""
    if _real_installation("nki_cpu_simulator"):
        return []
    _add_prefixes(dict(HARNESS_ALIASES))
    return sorted(HARNESS_ALIASES)


# Installed lazily: importing the target registers the PyTorch device (and imports torch), so
# it is looked up only when a script imports the alias.
TORCH_ALIASES = {"torch_neuronx": "trnsim.backend.torch_neuronx"}


def install_torch_aliases() -> list[str]:
    """Make `import torch_neuronx` serve trnsim's (nki_op, wrap_nki) where no real
    torch-neuronx is installed. Nothing is imported until a script imports it."""
    chosen = {a: r for a, r in TORCH_ALIASES.items() if not _real_installation(a)}
    for f in sys.meta_path:
        if isinstance(f, _AliasFinder):
            f.prefixes.update(chosen)
            break
    else:
        sys.meta_path.insert(0, _AliasFinder(chosen))
    return sorted(chosen)
