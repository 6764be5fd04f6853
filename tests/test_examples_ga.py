"""Each GA example kernel runs standalone under `trnsim run` and checks itself against numpy."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(REPO, "examples", "ga")
NAMES = (
    sorted(f for f in os.listdir(EXAMPLES) if f.endswith(".py")) if os.path.isdir(EXAMPLES) else []
)


@pytest.mark.parametrize("name", NAMES)
def test_example_runs_under_trnsim_run(name):
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("NEURON_PLATFORM_TARGET_OVERRIDE", None)
    r = subprocess.run(
        [sys.executable, "-m", "trnsim", "run", os.path.join(EXAMPLES, name)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert r.returncode == 0, f"{name} failed:\n{r.stdout}\n{r.stderr}"


def test_examples_do_not_import_trnsim():
    for name in NAMES:
        with open(os.path.join(EXAMPLES, name)) as f:
            src = f.read()
        assert "trnsim" not in src.replace("trnsim run", ""), name
        assert "import nki" in src, name
