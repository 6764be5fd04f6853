"""examples/torch/train_fsdp.py under torchrun: one node of 2 processes, and two nodes of one
process each (two torchrun agents meeting at one master address, as two hosts would): FSDP2
steps of the llama debug model on the `trn` backend equal the same steps on CPU + gloo (the
script's --check). Slow tier: each run starts fresh interpreters."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).parent))
from harness import free_port

EXAMPLE = Path(__file__).parents[3] / "examples" / "torch" / "train_fsdp.py"


def _torchrun(args, tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TRNSIM_MODE": "reference"}
    return [sys.executable, "-m", "torch.distributed.run", *args, str(EXAMPLE), "--check",
            "--mode", "reference", "--steps", "2", "--out", str(tmp_path)], env


def _finish(procs, tmp_path):
    outs = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=400)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
        outs.append(out)
        assert p.returncode == 0, out[-4000:]
    text = "\n".join(outs)
    for r in range(2):
        assert f"rank {r}: trn" in text and "equal (rtol" in text, text[-4000:]
    assert "DIFFERENT" not in text
    assert (tmp_path / "train_fsdp.pftrace").exists()
    return text


@pytest.mark.slow
def test_torchrun_one_node_two_processes(tmp_path):
    cmd, env = _torchrun(["--nproc-per-node", "2", "--master-port", str(free_port())],
                         tmp_path)
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True)
    text = _finish([p], tmp_path)
    assert "bound by" in text


@pytest.mark.slow
def test_torchrun_two_nodes_over_gloo(tmp_path):
    port = str(free_port())
    procs = []
    for node in (1, 0):
        cmd, env = _torchrun(["--nnodes", "2", "--node-rank", str(node), "--nproc-per-node",
                              "1", "--master-addr", "127.0.0.1", "--master-port", port],
                             tmp_path)
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    _finish(procs, tmp_path)
