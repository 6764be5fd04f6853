"""The Beta-1 example kernels in examples/beta1 run unmodified under `trnsim run` and match
their NumPy references (each script asserts and prints "<name>: ok")."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

EXAMPLES = sorted((pathlib.Path(__file__).resolve().parents[2] / "examples" / "beta1").glob("*.py"))


def test_all_issue_examples_exist():
    names = {p.stem for p in EXAMPLES}
    assert {
        "spmd_tensor_add",
        "matmul_tutorial",
        "transpose2d",
        "softmax_masked",
        "rmsnorm",
        "layernorm",
        "avgpool",
        "fp8_matmul",
    } <= names


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.stem)
def test_example_runs_under_trnsim_run(script):
    text = script.read_text()
    assert "import trnsim" not in text and "neuronxcc.nki" in text
    r = subprocess.run(
        [sys.executable, "-m", "trnsim", "run", str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=script.parent,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{script.stem}: ok" in r.stdout
