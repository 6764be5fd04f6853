"""profile_torch around a compiled step: slices labelled with the graph node or fused region
and the user's source line; `trnsim diff` compares the eager and the compiled step."""

from __future__ import annotations

import copy

import torch
import torch._dynamo
import torch.nn.functional as F
import trnsim.backend
from trnsim.backend.compile import reset_compile_stats
from trnsim.backend.models import MLP

import trnsim
from trnsim.cli import main as trnsim_main


def _step(model, opt, x, y):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()


def test_compiled_step_timeline_and_diff(dev, kernel_mode, tmp_path, capsys):
    torch._dynamo.reset()
    reset_compile_stats()
    torch.manual_seed(0)
    base = MLP()
    x, y = torch.randn(32, 32).to(dev), torch.randint(0, 10, (32,)).to(dev)
    traces = {}
    for name in ("eager", "compiled"):
        model = copy.deepcopy(base).to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        run = torch.compile(model, backend="trn") if name == "compiled" else model
        _step(run, opt, x, y)  # the compiled run's first step compiles (and times regions)
        with trnsim.profile_torch() as prof:
            _step(run, opt, x, y)
        traces[name] = prof
        prof.save(str(tmp_path / f"{name}.pftrace"))
    eager, compiled = traces["eager"], traces["compiled"]
    assert all("graph_node" not in r.extra for r in eager.launches)
    fused = [r for r in compiled.launches if r.op == "trnsim_fused::linear_act"]
    assert [r.extra["graph_node"] for r in fused] == ["linear_act#0 g0/fw:linear_act",
                                                      "linear_act#1 g0/fw:linear_act_1"]
    assert [r.loc.short() for r in fused] == ["models.py:20", "models.py:21"]
    labels = [compiled.label(r) for r in compiled.launches]
    assert "trnsim_fused::linear_act <linear_act#0 g0/fw:linear_act> models.py:20" in labels
    assert any("<g0/bw:" in lab and "[CompiledFunctionBackward]" in lab for lab in labels)
    # two fused launches replace four (two linears, gelu, tanh): a shorter, faster step
    assert len(compiled.launches) == len(eager.launches) - 2
    assert compiled.step_ns < eager.step_ns
    lines = {r["location"] for r in compiled.summary()["source_lines"]}
    assert {"models.py:20", "models.py:21", "models.py:22"} <= lines

    capsys.readouterr()
    assert trnsim_main(["diff", str(tmp_path / "eager.pftrace"),
                        str(tmp_path / "compiled.pftrace")]) == 0
    out = capsys.readouterr().out
    speedup = eager.step_ns / compiled.step_ns
    assert f"speedup {speedup:.2f}x" in out
    assert f"kernel launches      {len(eager.launches):12d} -> {len(compiled.launches):12d}" in out
    fused_row = next(line for line in out.splitlines() if "trnsim_fused::linear_act" in line)
    assert fused_row.split("->")[0].strip().endswith("-")  # not in the eager step
    assert "aten::gelu" in out
