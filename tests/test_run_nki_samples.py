"""tools/run_nki_samples.py: a script's verdict (exit status and what it prints) and the
torch_xla stand-in, whose device is trnsim's `trn`."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

TOOLS = pathlib.Path(__file__).resolve().parents[1] / "tools"
sys.path.insert(0, str(TOOLS))
import run_nki_samples as rs  # noqa: E402


def _script(tmp_path, text):
    p = tmp_path / "s.py"
    p.write_text(text)
    return [sys.executable, str(p)]


def test_a_script_passes_only_when_it_exits_0_without_a_mismatch_verdict(tmp_path):
    env = dict(os.environ)
    assert rs.run(_script(tmp_path, "print('NKI and Torch match')"), tmp_path, 60, env)[0]
    assert not rs.run(_script(tmp_path, "print('NKI and Torch differ')"), tmp_path, 60, env)[0]
    assert not rs.run(_script(tmp_path, "print('np.allclose pass? False')"), tmp_path, 60,
                      env)[0]
    ok, last, _ = rs.run(_script(tmp_path, "raise SystemExit('boom')"), tmp_path, 60, env)
    assert not ok and last == "boom"
    ok, last, _ = rs.run(_script(tmp_path, "import time; time.sleep(5)"), tmp_path, 0.5, env)
    assert not ok and last.startswith("timeout")


def test_the_torch_xla_stand_in_gives_the_trn_device():
    code = ("import torch_xla, torch_xla.core.xla_model as xm; "
            "import torch; x = torch.ones(2, device=xm.xla_device()); "
            "print(x.device.type, torch_xla.device().type)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(rs.SHIM),
                                                       os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["trn", "trn"]
