"""The PyTorch examples run as users run them: short runs, their output checked."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(script: str, *args: str, tmp_path: Path) -> str:
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "torch" / script), *args,
                        "--out", str(tmp_path)], capture_output=True, text=True, timeout=900,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def _losses(text: str) -> list[tuple[float, float]]:
    out = []
    for line in text.splitlines():
        if line.startswith("step "):
            parts = line.split()
            out.append((float(parts[4]), float(parts[6])))
    return out


def test_train_mlp_example(tmp_path):
    text = _run("train_mlp.py", "--steps", "3", tmp_path=tmp_path)
    losses = _losses(text)
    assert len(losses) == 3
    assert all(abs(c - d) <= 1e-4 * abs(c) for c, d in losses)
    assert losses[-1][0] < losses[0][0]
    assert "simulated device time" in text
    assert (tmp_path / "train_mlp.pftrace").stat().st_size > 0
    assert (tmp_path / "train_mlp.png").stat().st_size > 0


def test_train_transformer_example_reference_mode(tmp_path):
    text = _run("train_transformer.py", "--steps", "2", "--mode", "reference", "--seq", "32",
                tmp_path=tmp_path)
    losses = _losses(text)
    assert len(losses) == 2 and all(abs(c - d) <= 1e-5 * abs(c) for c, d in losses)
    assert "0 kernel launches" in text  # reference mode: no device time
