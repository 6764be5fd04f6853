"""trnsim.profile_torch: one timeline across launches, labelled with the ATen op, the user's
line and (in backward) the autograd node; the per-op table; files; `trnsim profile` on a torch
script; the TorchNeuron alias mode in a fresh process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import trnsim

ROOT = Path(__file__).resolve().parents[2]


def _step(dev):
    torch.manual_seed(0)
    lin = torch.nn.Linear(64, 32).to(dev)
    x = torch.randn(16, 64, device=dev)
    with trnsim.profile_torch() as p:
        y = torch.softmax(lin(x), dim=-1)  # THE FORWARD LINE
        y.sum().backward()
    return p


def test_profile_labels_ops_lines_and_backward(dev, kernel_mode):
    p = _step(dev)
    ops = [r.op for r in p.launches]
    assert "aten::addmm" in ops and "aten::_softmax" in ops
    fwd = next(r for r in p.launches if r.op == "aten::addmm")
    assert fwd.loc is not None and fwd.loc.filename == __file__
    assert "THE FORWARD LINE" in fwd.loc.code
    back = [r for r in p.launches if r.backward]
    assert back, "backward launches carry their autograd node"
    assert any(r.backward == "MmBackward0" or r.backward == "AddmmBackward0" for r in back)
    assert p.step_ns == pytest.approx(sum(r.latency_ns for r in p.launches))
    assert p.step_ns > 0


def test_table_and_report(dev, kernel_mode):
    p = _step(dev)
    rows = p.table()
    assert sum(r.count for r in rows) == len(p.launches)
    assert sum(r.share for r in rows) == pytest.approx(1.0)
    assert rows == sorted(rows, key=lambda r: -r.time_ns)
    mm = [r for r in rows if r.op in ("aten::addmm", "aten::mm")]
    assert all(r.mfu > 0 for r in mm)
    text = p.report()
    assert "aten::addmm" in text and "MFU" in text


def test_saved_timeline_has_one_slice_per_launch(dev, kernel_mode, tmp_path):
    p = _step(dev)
    out = p.save(str(tmp_path / "step.json"), png=str(tmp_path / "step.png"))
    with open(out["trace"]) as f:
        events = json.load(f)["traceEvents"]
    launches = [e for e in events if e.get("cat") == "kernel"]
    assert len(launches) == len(p.launches)
    first = launches[0]["args"]
    assert first["aten_op"] == p.launches[0].op and first["source"]
    assert os.path.getsize(out["png"]) > 1000
    with open(out["summary"]) as f:
        summary = json.load(f)
    assert summary["launches"] == len(p.launches)


def test_reference_mode_has_no_launches(dev, reference_mode):
    with trnsim.profile_torch() as p:
        (torch.ones(4, 4, device=dev) @ torch.ones(4, 4, device=dev)).sum()
    assert p.launches == [] and p.step_ns == 0
    with pytest.raises(ValueError, match="launched no kernel"):
        p.save("never.json")


def _run(args, env_extra=None, cwd=None):
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "trnsim", *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=600)


SCRIPT = """
import torch
x = torch.randn(32, 32, device="trn")
y = (x @ x).relu()
print("done", y.shape)
"""


def test_trnsim_profile_on_a_torch_script(tmp_path):
    script = tmp_path / "step.py"
    script.write_text(SCRIPT)
    r = _run(["profile", str(script), "-o", str(tmp_path / "t.json")])
    assert r.returncode == 0, r.stderr
    assert "done" in r.stdout and "launch" in r.stdout
    with open(tmp_path / "t.json") as f:
        events = json.load(f)["traceEvents"]
    names = [e["name"] for e in events if e.get("cat") == "kernel"]
    assert any(n.startswith("aten::mm") and "step.py:4" in n for n in names)


def test_neuron_alias_mode_runs_the_torchneuron_style_example():
    r = _run(["run", str(ROOT / "examples" / "torch" / "nki_custom_op.py")],
             {"TRNSIM_DEVICE": "neuron"})
    assert r.returncode == 0, r.stderr
    assert "values match: True" in r.stdout and "grad match: True" in r.stdout


def test_bad_environment_value_is_refused_with_the_allowed_values():
    env = {**os.environ, "TRNSIM_MODE": "fast"}
    r = subprocess.run([sys.executable, "-c", "import trnsim.backend"], capture_output=True,
                       text=True, env={**env, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}, timeout=300)
    assert r.returncode != 0
    assert "TRNSIM_MODE='fast' is not allowed; use one of: kernel, reference" in r.stderr
    # Autoloaded at `import torch`: one warning, and torch itself still imports.
    r = subprocess.run([sys.executable, "-c", "import torch; print(torch.ones(1).sum().item())"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "1.0"
    assert "TRNSIM_MODE='fast' is not allowed" in r.stderr and "Traceback" not in r.stderr


def test_trnsim_chip_selects_the_simulated_chip():
    code = ("import torch, trnsim.backend as b; x = torch.ones(4, device='trn');"
            "print(b.runtime.chip.name, torch.trn.mem_get_info()[1])")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**os.environ, "TRNSIM_CHIP": "trn2"}, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["trn2", str(96 * (1 << 30))]
