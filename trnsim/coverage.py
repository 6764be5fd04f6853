"""`trnsim coverage`: which NKI API names trnsim implements, per generation and module.

Reads the name inventory isa/nki_api_inventory.yaml (data, shipped as trnsim._isa) and looks
each name up in trnsim.nki (GA) or trnsim.compat.neuronxcc.nki (Beta 1). A name counts as
implemented when it exists and is not an unsupported stub. A stub is a callable that carries
`__trnsim_unsupported__ = True`, or whose qualified name contains "_unsupported" (the
collectives pattern); an nki.isa instruction also needs its semantics registered.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from trnsim import yamlfile
from trnsim.spec import isa_dir

GENERATIONS = ("ga", "beta1", "beta2")
# inventory module -> (python module, attribute path inside it holding the names)
_GA_TARGETS = {
    "nki": ("trnsim.nki", ""),
    "nki.compiler": ("trnsim.nki.compiler", ""),
    "nki.language": ("trnsim.nki.language", ""),
    "nki.isa": ("trnsim.nki.isa", ""),
    "nki.collectives": ("trnsim.nki.collectives", ""),
    "nki.typing": ("trnsim.nki.typing", ""),
    "nl.NkiTensor (attributes/methods)": ("trnsim.nki.language", "NkiTensor"),
    "nl.tile_size (attributes)": ("trnsim.nki.language", "tile_size"),
    "nki.isa.VirtualRegister / NkiInstruction": ("trnsim.nki.isa", ""),
    "nki.isa.constants": ("trnsim.nki.isa.constants", ""),
}
_B1_ROOT = "trnsim.compat.neuronxcc.nki"
_B1_TARGETS = {
    "nki": (_B1_ROOT, ""),
    "nki.language": (_B1_ROOT + ".language", ""),
    "nki.isa": (_B1_ROOT + ".isa", ""),
    "nki.compiler": (_B1_ROOT + ".compiler", ""),
    "nki.typing": (_B1_ROOT + ".typing", ""),
    "nki.tensor (methods)": (_B1_ROOT, "tensor"),
}
# The headline figure of the issue: share of nki.isa + nki.language names implemented.
HEADLINE_MODULES = ("nki.isa", "nki.language")


@dataclass
class ModuleCoverage:
    module: str
    implemented: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    note: str = ""

    @property
    def total(self) -> int:
        return len(self.implemented) + len(self.missing)

    @property
    def percent(self) -> float:
        return 100.0 * len(self.implemented) / self.total if self.total else 100.0


@cache
def inventory() -> dict[str, Any]:
    """The NKI name inventory (per generation: modules -> [{name, kind, ...}])."""
    with open(os.path.join(isa_dir(), "nki_api_inventory.yaml")) as f:
        return yamlfile.load(f)


def is_stub(obj: Any) -> bool:
    """True for an object that only raises 'not simulated' (see module docstring)."""
    if getattr(obj, "__trnsim_unsupported__", False):
        return True
    qual = getattr(obj, "__qualname__", "") or ""
    return isinstance(qual, str) and "_unsupported" in qual


def _lookup(root: Any, dotted: str) -> tuple[bool, Any]:
    obj = root
    for part in dotted.split("."):
        try:
            obj = getattr(obj, part)
        except Exception:
            return False, None
    return True, obj


def _instruction_ok(name: str) -> bool:
    """An instruction wrapper counts when its semantics are registered, or when no isa/
    record of that name exists (the wrapper lowers to other instructions)."""
    from trnsim import semantics
    from trnsim.spec import instruction_specs

    try:
        if semantics.lookup(name) is not None:
            return True
    except Exception:
        return False
    try:
        return name not in instruction_specs()
    except Exception:
        return False


def module_coverage(
    module: str, entries: list[dict[str, Any]], target: tuple[str, str], check_instructions: bool
) -> ModuleCoverage:
    cov = ModuleCoverage(module)
    pymod, attr = target
    try:
        root = importlib.import_module(pymod)
    except ImportError as e:
        cov.missing = [e_["name"] for e_ in entries]
        cov.note = f"{pymod} is not importable ({e})"
        return cov
    if attr:
        found, root = _lookup(root, attr)
        if not found:
            cov.missing = [e_["name"] for e_ in entries]
            cov.note = f"{pymod}.{attr} does not exist"
            return cov
    for entry in entries:
        name = entry["name"]
        found, obj = _lookup(root, name)
        ok = found and not is_stub(obj)
        if ok and check_instructions and entry.get("kind") == "instruction":
            ok = _instruction_ok(name)
        (cov.implemented if ok else cov.missing).append(name)
    return cov


def coverage_data(generation: str = "ga") -> dict[str, ModuleCoverage]:
    """Per inventory module of a generation: implemented and missing names, percent."""
    if generation not in GENERATIONS:
        raise ValueError(f"generation {generation!r} (known: {', '.join(GENERATIONS)})")
    modules = inventory()["generations"][generation]["modules"]
    targets = _B1_TARGETS if generation == "beta1" else _GA_TARGETS
    out = {}
    for module, entries in modules.items():
        target = targets.get(module)
        if target is None:
            cov = ModuleCoverage(
                module, missing=[e["name"] for e in entries], note="no trnsim module maps to it"
            )
        else:
            cov = module_coverage(module, entries, target, module.endswith("isa"))
        out[module] = cov
    return out


@dataclass
class PathCoverage:
    """Whether each import path of a generation (`module_paths` in the inventory) imports."""

    implemented: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    not_simulated: list[str] = field(default_factory=list)  # compiler/runtime: importable stubs

    @property
    def total(self) -> int:
        return len(self.implemented) + len(self.missing) + len(self.not_simulated)


def trnsim_module_for(path: str) -> str | None:
    """The trnsim module an import path resolves to under the aliases (trnsim.aliases)."""
    from trnsim.aliases import ALIASES

    best = max((a for a in ALIASES if path == a or path.startswith(a + ".")), key=len,
               default=None)
    return None if best is None else ALIASES[best] + path[len(best):]


def _path_status(path: str) -> str:
    real = trnsim_module_for(path)
    if real is None:
        return "missing"
    try:
        mod = importlib.import_module(real)
    except ImportError:
        return "missing"
    return "not_simulated" if getattr(mod, "__trnsim_unsupported__", False) else "implemented"


def path_coverage(generation: str = "ga") -> PathCoverage:
    """Import paths public NKI code uses (`import nki.isa.constants`, ...), checked by importing
    the trnsim module each resolves to; compiler/runtime paths trnsim only names count apart."""
    cov = PathCoverage()
    for entry in inventory()["generations"][generation].get("module_paths", []):
        getattr(cov, _path_status(entry["path"])).append(entry["path"])
    return cov


def headline_percent(data: dict[str, ModuleCoverage]) -> float:
    done = sum(len(data[m].implemented) for m in HEADLINE_MODULES if m in data)
    total = sum(data[m].total for m in HEADLINE_MODULES if m in data)
    return 100.0 * done / total if total else 100.0


def format_coverage(generation: str = "ga") -> str:
    """A text report: one line per module, then the missing names."""
    data = coverage_data(generation)
    label = inventory()["generations"][generation].get("label", generation)
    lines = [f"NKI API coverage: {label}", ""]
    width = max(len(m) for m in data)
    for m, cov in data.items():
        lines.append(
            f"  {m:<{width}}  {len(cov.implemented):4d}/{cov.total:<4d} "
            f"{cov.percent:5.1f}%" + (f"  ({cov.note})" if cov.note else "")
        )
    lines.append("")
    lines.append(f"  nki.isa + nki.language: {headline_percent(data):.1f}% implemented")
    paths = path_coverage(generation)
    if paths.total:
        lines.append(f"  module paths: {len(paths.implemented)}/{paths.total} implemented"
                     + (f", {len(paths.not_simulated)} importable but not simulated "
                        f"({', '.join(paths.not_simulated)})" if paths.not_simulated else ""))
    missing = [(m, c.missing) for m, c in data.items() if c.missing]
    if paths.missing:
        missing.append(("module paths", paths.missing))
    if missing:
        lines.append("")
        lines.append("Missing:")
        for m, names in missing:
            lines.append(f"  {m}: {', '.join(names)}")
    return "\n".join(lines)
