"""A rank of a torch.distributed world owns a logical NeuronCore at its LNC: its matmuls launch
gemm[2] on both physical cores (values as on the CPU, less device time than on one core);
outside a world the device keeps one physical core. In-process: the rank's distributed state
is set on the runtime for the test and restored after it. Also: under TRNSIM_DEVICE=neuron
the backend is registered as `neuron` (a subprocess, world of one; slow tier)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


@pytest.fixture
def rank_at(request):
    """Make this process look like a rank at LNC=`lnc` (or no rank: None), kernel mode."""
    import trnsim.backend
    from trnsim.backend.distributed.state import DistState

    from trnsim.topology import default_topology, load_topology

    rt = trnsim.backend.runtime
    saved = rt.distributed, rt.mode

    def make(lnc):
        rt.distributed = None if lnc is None else \
            DistState(load_topology(default_topology(rt.chip)), lnc)
        rt.mode = "kernel"
        return rt

    yield make
    rt.distributed, rt.mode = saved


def _mm_launch(rt, a, b):
    from trnsim.backend.profiler import profile_torch

    dev = rt.name
    x, w = a.to(dev), b.to(dev)
    with profile_torch() as p:
        y = torch.addmm(torch.zeros(b.shape[1], device=dev), x, w)
    (rec,) = [r for r in p.launches if r.op.startswith("aten::addmm")]
    return y.cpu(), rec


def test_a_rank_at_lnc2_runs_its_matmuls_on_both_cores(rank_at):
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(256, 192, generator=g), torch.randn(192, 1024, generator=g)
    ref = a @ b
    rt = rank_at(None)
    assert rt.lnc == 1
    y1, one = _mm_launch(rt, a, b)
    rt = rank_at(2)
    assert rt.lnc == 2
    y2, two = _mm_launch(rt, a, b)
    torch.testing.assert_close(y1, ref, rtol=1e-4, atol=1e-3)
    torch.testing.assert_close(y2, ref, rtol=1e-4, atol=1e-3)
    assert one.profile.cores == [0] and two.profile.cores == [0, 1]
    assert two.latency_ns < one.latency_ns


ALIAS = """
import torch, torch.distributed as dist
import trnsim.backend
dist.init_process_group("neuron", store=dist.HashStore(), rank=0, world_size=1)
t = torch.ones(3, device="neuron")
dist.all_reduce(t)
print(dist.get_backend(), t.device.type, t.cpu().tolist())
"""


@pytest.mark.slow  # a fresh interpreter: about 15 s on a loaded machine
def test_the_backend_is_neuron_in_alias_mode(tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "TRNSIM_DEVICE": "neuron", "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    r = subprocess.run([sys.executable, "-c", ALIAS], capture_output=True, text=True, env=env,
                       timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split("\n")[-2] == "neuron neuron [1.0, 1.0, 1.0]"
