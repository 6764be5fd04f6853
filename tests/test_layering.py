"""Imports point one way (STYLE.md §2): spec -> memory -> semantics -> engines/timing -> core ->
nki -> kernels -> backend. trace/viz import nothing of ours below them; only backend imports torch,
only viz matplotlib."""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]

# Layer of each first-level module under trnsim/ (lower may not import higher).
LAYERS = {
    "errors": 0, "device_config": 0, "program": 0, "yamlfile": 0, "gcpause": 0, "hostmem": 0,
    "dtypes": 1,
    "dtype_promotion": 1,
    "chip": 2, "chipfile": 2, "chipspec": 2, "spec": 2, "topology": 2,
    "layout": 1, "allocation": 3, "memory": 3, "wide_fp": 3, "operands": 3,
    "semantics": 4, "timing": 5, "trace": 5, "viz": 5, "core": 6,
    "nki": 7,
    "compat": 8, "aliases": 8, "coverage": 9, "timing.profile": 9, "report": 9, "trace_files": 9,
    "multirank": 9, "kernels": 10,
    "backend": 11, "cli": 12, "cli_checks": 12, "cli_profile": 12, "pytest_plugin": 12,
    "__init__": 12, "__main__": 12, "demo": 12, "torch_autoload": 12,
}


def _module_of(path: pathlib.Path) -> str:
    rel = path.relative_to(ROOT)
    top = rel.parts[0]
    if top == "kernels":
        return "kernels"
    if top == "backend":
        return "backend"
    if rel.parts[1:] == ("timing", "profile.py"):
        return "timing.profile"  # the profile() entry point runs kernels: above nki
    part = rel.parts[1]
    return part[:-3] if part.endswith(".py") else part


def _imports(path: pathlib.Path) -> list[str]:
    tree = ast.parse(path.read_text())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append(node.module)
    return out


def _files():
    for sub in ("trnsim", "kernels", "backend"):
        yield from (ROOT / sub).rglob("*.py")


def test_imports_point_one_way():
    bad = []
    for f in _files():
        me = _module_of(f)
        if me not in LAYERS:
            bad.append(f"{f.relative_to(ROOT)}: module '{me}' has no layer in test_layering.py")
            continue
        for imp in _imports(f):
            parts = imp.split(".")
            if parts[0] != "trnsim" or len(parts) < 2:
                continue
            other = parts[1]
            if other in LAYERS and LAYERS[other] > LAYERS[me]:
                bad.append(f"{f.relative_to(ROOT)} ({me}) imports {imp} ({other})")
    assert not bad, "\n".join(bad)


def test_only_backend_imports_torch_at_module_level_and_only_viz_matplotlib():
    bad = []
    for f in _files():
        me = _module_of(f)
        tree = ast.parse(f.read_text())
        for node in tree.body:  # module level only; lazy imports inside functions are fine
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for n in names:
                if n.split(".")[0] == "torch" and me != "backend":
                    bad.append(f"{f.relative_to(ROOT)} imports torch")
                if n.split(".")[0] == "matplotlib" and me != "viz":
                    bad.append(f"{f.relative_to(ROOT)} imports matplotlib")
    assert not bad, "\n".join(bad)
