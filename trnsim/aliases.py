"""Make `import nki` (and, once present, `import neuronxcc.nki`) resolve to trnsim."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import ModuleType

# alias prefix -> trnsim module implementing it
ALIASES = {"nki": "trnsim.nki", "neuronxcc": "trnsim.compat.neuronxcc"}


class _AliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves `nki.x.y` as the already-imported `trnsim.nki.x.y` module object."""

    def __init__(self, prefixes: dict[str, str]):
        self.prefixes = prefixes

    def _target(self, fullname: str) -> str | None:
        for alias, real in self.prefixes.items():
            if fullname == alias or fullname.startswith(alias + "."):
                return real + fullname[len(alias) :]
        return None

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
    """Make `nki` and `neuronxcc.nki` import trnsim's implementations.

    A real installation of either package is left alone unless force=True.
    Returns the aliases installed.
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
