"""Load a held-out kernel file from benchmarks/heldout_kernels (they are scripts, not a
package)."""

from __future__ import annotations

import importlib.util
import pathlib
from types import ModuleType

DIR = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "heldout_kernels"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"heldout_{name}", DIR / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
