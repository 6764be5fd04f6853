"""neuronxcc.nki namespaces resolve to trnsim (aliases, `trnsim run`, pytest plugin) and never
shadow a real installation unless forced."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import neuronxcc
import neuronxcc.nki as nki
import neuronxcc.nki.compiler as ncc
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt
import numpy as np
import pytest

import trnsim.compat.neuronxcc.nki as b1


def test_modules_are_trnsims():
    assert nki is b1
    assert neuronxcc.__name__ == "trnsim.compat.neuronxcc"
    assert nl.__name__ == "trnsim.compat.neuronxcc.nki.language"
    assert nisa.__name__ == "trnsim.compat.neuronxcc.nki.isa"
    assert ncc.__name__ == "trnsim.compat.neuronxcc.nki.compiler"
    assert nt.__name__ == "trnsim.compat.neuronxcc.nki.typing"
    from neuronxcc import nki as again

    assert again is nki


def test_host_api_names():
    for name in (
        "jit",
        "baremetal",
        "benchmark",
        "profile",
        "simulate_kernel",
        "trace",
        "tensor",
        "FrameworkKernel",
        "sync_thread",
        "errors",
    ):
        assert hasattr(nki, name), name
    assert nki.errors.err_tensor_access_out_of_bound
    assert nki.sync_thread() is None


def test_framework_kernel_maps_numpy_tensors():
    fk = nki.FrameworkKernel()
    a = np.zeros((4, 8), np.float16)
    assert fk.is_framework_tensor(a)
    assert fk.map_framework_tensor(a) == ((4, 8), nl.float16)
    assert fk.dump_config()["class"] == "FrameworkKernel"


def _run(code: str, *args: str, tmp_path) -> subprocess.CompletedProcess:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(code))
    return subprocess.run(
        [sys.executable, *args, str(script)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )


def test_trnsim_run_resolves_neuronxcc(tmp_path):
    code = """
        import neuronxcc.nki as nki
        print(nki.__name__)
    """
    r = _run(code, "-m", "trnsim", "run", tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "trnsim.compat.neuronxcc.nki"


def test_real_installation_is_not_shadowed(tmp_path):
    pkg = tmp_path / "neuronxcc"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("REAL = True\n")
    code = f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        import trnsim
        trnsim.install_nki_aliases()
        import neuronxcc
        print(getattr(neuronxcc, "REAL", False))
        trnsim.install_nki_aliases(force=True)
        sys.modules.pop("neuronxcc", None)
        import neuronxcc.nki
        print(neuronxcc.nki.__name__)
    """
    r = _run(code, tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "trnsim.compat.neuronxcc.nki"]


def test_pytest_plugin_resolves_neuronxcc(tmp_path):
    test = tmp_path / "test_b1_plugin.py"
    test.write_text(
        textwrap.dedent("""
        def test_import():
            import neuronxcc.nki.language as nl
            assert nl.__name__ == "trnsim.compat.neuronxcc.nki.language"
    """)
    )
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "--trnsim", "-p", "no:cacheprovider", str(test)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("name", ["engine", "reduce_cmd", "dge_mode", "oob_mode", "nc_version"])
def test_isa_enums(name):
    assert hasattr(nisa, name)
    assert nisa.dge_mode.none == 0 and nisa.dge_mode.unknown == 3  # B1 numbering
    assert nisa.tensor_engine is nisa.engine.tensor
    assert nisa.vector_engine is nisa.engine.vector
    assert nisa.fp32.min == pytest.approx(-3.4028235e38)
