"""Error locations do not depend on where the checkout or the user's files live (issue 13.0):
a kernel in a user folder named `trnsim/` (git's default clone name) is reported at its own
line, and the tests' internal-path check compares with the package's install directory."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest
from source_paths import TRNSIM_DIR, assert_no_internal_path, internal_paths_in

import trnsim
from trnsim.errors import ConstraintError
from trnsim.program import is_internal_file

KERNEL = textwrap.dedent("""\
    import numpy as np
    import nki
    import nki.isa as nisa
    import nki.language as nl


    def bad_kernel(a):
        t = nl.ndarray((256, 4), nl.float32, buffer=nl.sbuf)
        return t


    if __name__ == "__main__":
        nki.simulate(bad_kernel)(np.zeros((128, 4), np.float32))
""")
BAD_LINE = 8  # the nl.ndarray line above


@pytest.fixture
def user_kernel(tmp_path):
    folder = tmp_path / "trnsim" / "kernels"
    folder.mkdir(parents=True)
    path = folder / "user_kernel.py"
    path.write_text(KERNEL)
    return path


def test_a_user_folder_named_trnsim_is_user_code(user_kernel):
    assert not is_internal_file(str(user_kernel))
    assert is_internal_file(os.path.join(TRNSIM_DIR, "core.py"))


def test_failing_kernel_under_trnsim_folder_reports_its_line(user_kernel):
    trnsim.install_nki_aliases()
    spec = importlib.util.spec_from_file_location("user_kernel_under_trnsim", user_kernel)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    import nki
    import numpy as np

    with pytest.raises(ConstraintError, match="partition dimension 256") as exc:
        nki.simulate(mod.bad_kernel)(np.zeros((128, 4), np.float32))
    assert exc.value.loc.filename == str(user_kernel)
    assert exc.value.loc.lineno == BAD_LINE
    assert f"{user_kernel}:{BAD_LINE} in bad_kernel" in str(exc.value)
    # the user's own path holds a folder named trnsim: a fragment check would fail
    assert f"{os.sep}trnsim{os.sep}" in str(exc.value)
    assert_no_internal_path(str(exc.value))


def test_cli_run_under_trnsim_folder_reports_its_line(user_kernel):
    proc = subprocess.run([sys.executable, "-m", "trnsim", "run", str(user_kernel)],
                          capture_output=True, text=True, cwd=user_kernel.parent, timeout=120)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"trnsim run: ConstraintError: {user_kernel}:{BAD_LINE} ")
    assert_no_internal_path(proc.stderr)


def test_internal_path_check_sees_simulator_files_only():
    inside = os.path.join(TRNSIM_DIR, "nki", "runner.py")
    assert internal_paths_in(f'File "{inside}", line 3') == [TRNSIM_DIR]
    assert internal_paths_in("at trnsim/nki/runner.py:12") == ["trnsim/nki/runner.py"]
    user_checkout = os.path.join(os.sep, "home", "me", "trnsim")  # a clone's default folder
    assert internal_paths_in(os.path.join(user_checkout, "core.py") + ":4 in k") == []
    assert internal_paths_in(os.path.join(user_checkout, "tests", "test_x.py") + ":9") == []
    with pytest.raises(AssertionError, match="simulator files"):
        assert_no_internal_path(f"{inside}:1")
