"""examples/torch/compile_transformer.py as users run it (in this process, to share its torch
import): eager and compiled losses side by side, both step times, the fused regions, both
timelines written."""

from __future__ import annotations

import re
import runpy
import sys
from pathlib import Path

import torch._dynamo
from trnsim.backend.compile import reset_compile_stats

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "torch" / "compile_transformer.py"


def test_compile_transformer_example(kernel_mode, tmp_path, capsys, monkeypatch):
    torch._dynamo.reset()
    reset_compile_stats()
    monkeypatch.setattr(sys, "argv", [str(EXAMPLE), "--steps", "2", "--layers", "1", "--dim",
                                      "32", "--seq", "16", "--vocab", "64", "--no-png",
                                      "--out", str(tmp_path)])
    runpy.run_path(str(EXAMPLE), run_name="__main__")
    out = capsys.readouterr().out
    losses = [tuple(float(v) for v in m.groups())
              for m in re.finditer(r"loss eager (\S+)  compiled (\S+)", out)]
    assert len(losses) == 2
    assert all(abs(a - b) <= 1e-5 * abs(a) for a, b in losses)
    m = re.search(r"eager (\S+) us \((\d+) launches\), compiled (\S+) us \((\d+) launches\)",
                  out)
    assert m is not None
    assert float(m[3]) < float(m[1]) and int(m[4]) < int(m[2])
    for region in ("swiglu_mlp#0", "attention#0", "rms_norm#0", "cross_entropy#0"):
        assert region in out
    assert "step device time us" in out
    for name in ("compile_eager", "compile_compiled"):
        assert (tmp_path / f"{name}.pftrace").stat().st_size > 0
