"""Ways unmodified user code reaches trnsim: trnsim run, aliases, the pytest plugin,
nki.simulate / nki.jit / nki.cpu_simulate, torch tensors, and the platform env variable."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from trnsim.errors import SimulationWarning

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("NEURON_PLATFORM_TARGET_OVERRIDE", None)
    env.update(extra)
    return env


def _python(args: list[str], cwd: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env=_env(**env),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


KERNEL_SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    import nki
    import nki.language as nl

    @nki.jit
    def double(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.multiply(nl.load(a), 2.0))
        return out

    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_allclose(double(a), 2 * a)
    print("args", sys.argv[1:], nki.__name__)
""")


def test_trnsim_run_script_with_args(tmp_path):
    script = tmp_path / "user_kernel.py"
    script.write_text(KERNEL_SCRIPT)
    r = _python(["-m", "trnsim", "run", str(script), "--flag", "7"], str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "args ['--flag', '7'] trnsim.nki" in r.stdout


def test_trnsim_run_reports_kernel_errors(tmp_path):
    script = tmp_path / "bad.py"
    script.write_text(
        textwrap.dedent("""
        import numpy as np
        import nki
        import nki.language as nl

        def kernel(a):
            return nl.ndarray((256, 4), nl.float32)

        nki.simulate(kernel)(np.zeros((2, 2), np.float32))
    """)
    )
    r = _python(["-m", "trnsim", "run", str(script)], str(tmp_path))
    assert r.returncode == 1
    assert "ConstraintError" in r.stderr
    assert "bad.py:7" in r.stderr


def _fake_package(root, name: str, marker: str) -> None:
    pkg = root / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text(f"MARKER = {marker!r}\n")


def test_aliases_never_shadow_a_real_nki_unless_forced(tmp_path):
    _fake_package(tmp_path, "nki", "real-nki")
    _fake_package(tmp_path, "neuronxcc", "real-neuronxcc")
    code = (
        "import trnsim; installed = trnsim.install_nki_aliases({force}); import nki; "
        "import neuronxcc; print(installed, getattr(nki, 'MARKER', nki.__name__), "
        "getattr(neuronxcc, 'MARKER', neuronxcc.__name__))"
    )
    r = _python(["-c", code.format(force="")], str(tmp_path), PYTHONPATH=f"{tmp_path}:{REPO}")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["[]", "real-nki", "real-neuronxcc"]
    r = _python(
        ["-c", code.format(force="force=True")], str(tmp_path), PYTHONPATH=f"{tmp_path}:{REPO}"
    )
    assert r.returncode == 0, r.stderr
    assert "trnsim.nki" in r.stdout
    assert "real-nki" not in r.stdout


def test_aliases_without_a_real_package(tmp_path):
    code = (
        "import trnsim; print(trnsim.install_nki_aliases()); import nki.language as nl; "
        "import nki.isa; print(nl.__name__, nki.isa.__name__)"
    )
    r = _python(["-c", code], str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "'nki'" in r.stdout
    assert "trnsim.nki.language trnsim.nki.isa" in r.stdout


PYTEST_FILE = textwrap.dedent("""
    import numpy as np
    import nki
    import nki.language as nl

    @nki.jit
    def add_one(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.add(nl.load(a), 1.0))
        return out

    def test_add_one():
        a = np.zeros((4, 4), np.float32)
        np.testing.assert_allclose(add_one(a), a + 1)
""")


def test_pytest_plugin_runs_an_existing_suite(tmp_path):
    (tmp_path / "test_user.py").write_text(PYTEST_FILE)
    # suites often import nki in their conftest: the aliases must exist before it loads
    (tmp_path / "conftest.py").write_text("import nki.language as nl\nPMAX = 128\n")
    args = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "test_user.py"]
    r = _python([*args, "--trnsim", "--trnsim-chip", "trn2"], str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 passed" in r.stdout
    r = _python(args, str(tmp_path))
    assert r.returncode != 0  # without --trnsim there is no `nki` to import


def test_pytest_plugin_profiles_each_test(tmp_path):
    """--trnsim-profile DIR: each test's launches become DIR/<test id>.pftrace and its summary;
    the simulated time is a junitxml property and the terminal summary lists the tests."""
    import json
    import xml.etree.ElementTree as ET

    (tmp_path / "test_user.py").write_text(PYTEST_FILE + "\n\ndef test_no_kernel():\n    pass\n")
    out = tmp_path / "profiles"
    args = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "test_user.py", "--trnsim",
            "--trnsim-profile", str(out), "--junitxml", str(tmp_path / "j.xml")]
    r = _python(args, str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    traces = sorted(p.name for p in out.iterdir())
    assert traces == ["test_user.py.test_add_one.pftrace",
                      "test_user.py.test_add_one.pftrace.summary.json"], traces
    summary = json.loads((out / traces[1]).read_text())
    launches = summary["launches"]
    assert launches[0]["kernel"] == "add_one" and launches[0]["total_time_us"] > 0
    props = {p.get("name"): float(p.get("value"))
             for p in ET.parse(tmp_path / "j.xml").getroot().iter("property")}
    assert props["trnsim_time_us"] == pytest.approx(launches[0]["total_time_us"], abs=1e-3)
    assert "trnsim profiles" in r.stdout and "1 timeline(s) in" in r.stdout


# ---------------------------------------------------------------- in-process entry points
def _scale_kernel(a, factor=2.0):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.multiply(nl.load(a), factor))
    return out


def test_simulate_numpy_and_kwargs():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_allclose(nki.simulate(_scale_kernel)(a), 2 * a)
    np.testing.assert_allclose(nki.simulate(_scale_kernel)(a=a, factor=3.0), 3 * a)


def test_simulate_lnc2_kernel():
    def kernel(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        pid = nl.program_id(0)
        rows = a.shape[0] // nl.num_programs()
        t = nl.load(a[nl.ds(pid * rows, rows), :])
        nl.store(out[nl.ds(pid * rows, rows), :], nl.add(t, float(pid)))
        return out

    a = np.zeros((4, 4), np.float32)
    out = nki.simulate(nki.jit(kernel)[2])(a)
    np.testing.assert_array_equal(out[:2], 0)
    np.testing.assert_array_equal(out[2:], 1)


def test_torch_tensors_in_torch_tensors_out():
    torch = pytest.importorskip("torch")
    a = torch.arange(8, dtype=torch.float32).reshape(2, 4)
    out = nki.simulate(_scale_kernel)(a)
    assert isinstance(out, torch.Tensor)
    assert torch.equal(out, a * 2)
    b = torch.ones(2, 4, dtype=torch.bfloat16)
    out_b = nki.jit(_scale_kernel)(b)
    assert isinstance(out_b, torch.Tensor)
    assert out_b.dtype == torch.bfloat16
    assert torch.equal(out_b, b * 2)


def test_jit_under_nki_simulator_env(monkeypatch):
    monkeypatch.setenv("NKI_SIMULATOR", "1")
    kernel = nki.jit(_scale_kernel)
    a = np.ones((2, 2), np.float32)
    np.testing.assert_allclose(kernel(a), 2 * a)

    @nki.jit(mode="simulation")
    def with_mode(x):
        return _scale_kernel(x)

    np.testing.assert_allclose(with_mode(a), 2 * a)


# nl.tile_size.gemm_moving_fmax is 512 on trn3 too (AWS's trn3 MX tutorial and nki-library
# size tiles by it); NC-v4's nc_matmul itself takes up to 4096 (chip.tensor.moving_fmax).
@pytest.mark.parametrize(
    ("target", "version", "moving"),
    [("trn1", 2, 512), ("trn2", 3, 512), ("gen4", 4, 512), ("", 4, 512)],
)
def test_platform_target_env(monkeypatch, target, version, moving):
    if target:
        monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", target)
    else:
        monkeypatch.delenv("NEURON_PLATFORM_TARGET_OVERRIDE", raising=False)
    got = {}

    def kernel(a):
        got["v"] = int(nisa.get_nc_version())
        got["moving"] = nl.tile_size.gemm_moving_fmax
        return a

    nki.simulate(kernel)(np.zeros((2, 2), np.float32))
    assert got == {"v": version, "moving": moving}


def test_cpu_simulate_with_lnc_and_kwargs():
    a = np.ones((4, 4), np.float32)
    np.testing.assert_allclose(nki.cpu_simulate(_scale_kernel)[1](a=a, factor=4.0), 4 * a)
    # Both programs of the LNC2 launch write all of the shared output: a race on hardware.
    with pytest.warns(SimulationWarning, match="no core_barrier between them"):
        np.testing.assert_allclose(nki.cpu_simulate(nki.jit(_scale_kernel))[2](a=a), 2 * a)


def test_written_inputs_are_updated_in_place():
    def kernel(a):
        nl.store(a, nl.add(nl.load(a), 1.0))
        return a

    a = np.zeros((2, 3), np.float32)
    nki.simulate(kernel)(a)
    np.testing.assert_array_equal(a, 1)


def test_the_garbage_collector_runs_again_after_a_launch_even_one_that_failed():
    import gc

    from trnsim.errors import ConstraintError

    def bad(x):
        nl.ndarray((129, 4), nl.float32, buffer=nl.sbuf)  # more than 128 partitions
        return x

    def good(x):
        assert not gc.isenabled()  # paused while the kernel is traced
        return x

    assert gc.isenabled()
    nki.simulate(good)(np.zeros((2, 2), np.float32))
    assert gc.isenabled()
    with pytest.raises(ConstraintError):
        nki.simulate(bad)(np.zeros((2, 2), np.float32))
    assert gc.isenabled()
