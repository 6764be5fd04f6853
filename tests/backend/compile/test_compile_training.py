"""The device issue's workloads compiled with backend="trn" train like eager on the device:
the MLP and the transformer block (tests/backend/training.py), 5 steps, losses and parameters.

Tolerances (the README's torch.compile subsection): fp32 losses rtol 1e-5 and parameters atol
1e-5 (fused kernels sum in another order; most regions are bit for bit); bf16 autocast runs
unfused (no region is fused under autocast), so losses and parameters are eager's within
bf16's rounding of the same ops (2e-2, as the eager-vs-CPU training tests); an optimizer
step compiled on its own within 1e-5 of eager's (its graph computes AdamW's update with
tensors where eager uses Python floats).
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch._dynamo
import trnsim.backend
from training import OPTIMIZERS, workload
from trnsim.backend.compile import reset_compile_stats

STEPS = 5
TOL = {"fp32": (1e-5, 1e-5), "bf16": (2e-2, 2e-2)}


def _train(model, batch, loss_fn, opt_name, dev, *, compiled, compile_step=False,
           bf16=False):
    model = copy.deepcopy(model).to(dev)
    opt = OPTIMIZERS[opt_name](model.parameters())
    data = [t.to(dev) for t in batch]
    fwd = torch.compile(model, backend="trn") if compiled else model
    step = torch.compile(opt.step, backend="trn") if compile_step else opt.step
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        with torch.autocast(device_type=dev, dtype=torch.bfloat16, enabled=bf16):
            loss = loss_fn(fwd, *data)
        loss.backward()
        step()
        losses.append(loss.item())
    return losses, {k: v.detach().cpu() for k, v in model.state_dict().items()}


def _compare(eager, compiled, precision):
    rtol, atol = TOL[precision]
    torch.testing.assert_close(torch.tensor(compiled[0]), torch.tensor(eager[0]), rtol=rtol,
                               atol=0)
    for k, v in eager[1].items():
        torch.testing.assert_close(compiled[1][k].float(), v.float(), rtol=0, atol=atol, msg=k)


@pytest.mark.parametrize(("name", "opt", "patterns"), [
    # the MLP also trains compiled, optimizer step included, in test_compiled_optimizer_step
    pytest.param("mlp", "sgd", {"linear_act"}, id="mlp-sgd", marks=pytest.mark.slow),
    pytest.param("transformer", "adamw", {"add_norm", "swiglu_mlp", "cross_entropy"},
                 id="transformer-adamw"),
])
def test_compiled_training_matches_eager(dev, kernel_mode, name, opt, patterns):
    torch._dynamo.reset()
    reset_compile_stats()
    model, batch, loss_fn = workload(name)
    eager = _train(model, batch, loss_fn, opt, dev, compiled=False)
    compiled = _train(model, batch, loss_fn, opt, dev, compiled=True)
    assert eager[0][-1] < eager[0][0]
    _compare(eager, compiled, "fp32")
    stats = trnsim.backend.compile_stats()
    assert stats.compiles == 1 and stats.recompiles == 0
    assert stats.graphs[0].runs == {"forward": STEPS, "backward": STEPS}
    assert {r.pattern for r in stats.regions} == patterns


@pytest.mark.parametrize("name", ["mlp", pytest.param("transformer", marks=pytest.mark.slow)])
def test_compiled_training_under_bf16_autocast(dev, kernel_mode, name):
    torch._dynamo.reset()
    reset_compile_stats()
    model, batch, loss_fn = workload(name)
    eager = _train(model, batch, loss_fn, "sgd", dev, compiled=False, bf16=True)
    compiled = _train(model, batch, loss_fn, "sgd", dev, compiled=True, bf16=True)
    _compare(eager, compiled, "bf16")
    assert trnsim.backend.compile_stats().regions == []  # autocast: node by node


def test_compiled_optimizer_step(dev, kernel_mode):
    """The model and AdamW's step compiled: the step is one inference graph whose parameter
    and state updates land in the live tensors (in place, after backend.compile.reinplace)."""
    torch._dynamo.reset()
    reset_compile_stats()
    model, batch, loss_fn = workload("mlp")
    eager = _train(model, batch, loss_fn, "adamw", dev, compiled=False)
    compiled = _train(model, batch, loss_fn, "adamw", dev, compiled=True, compile_step=True)
    _compare(eager, compiled, "fp32")
    stats = trnsim.backend.compile_stats()
    assert {r.pattern for r in stats.regions} == {"linear_act"}
    graphs = stats.graphs
    assert {"forward", "backward"} in [set(g.aot_graphs) for g in graphs]
    step = next(g for g in graphs if "inference" in g.aot_ops).aot_ops["inference"]
    # re-inplaced as eager runs it: updates in place, no copies back into the parameters
    assert "aten.copy_.default" not in step
    assert {"aten._foreach_lerp_.Scalar", "aten._foreach_addcdiv_.Scalar"} <= set(step)


def test_compiled_batch_norm_updates_its_buffers_on_the_device(dev, kernel_mode):
    """The CNN block (BatchNorm2d) trains compiled as eager, running statistics included:
    AOTAutograd's functional batch norm runs as the device's native_batch_norm kernel, which
    updates the buffers in place (no copies back, nothing on the host), in training and eval."""
    torch._dynamo.reset()
    reset_compile_stats()
    model, batch, loss_fn = workload("cnn")
    eager = _train(model, batch, loss_fn, "sgd", dev, compiled=False)
    with trnsim.profile_torch() as prof:
        compiled = _train(model, batch, loss_fn, "sgd", dev, compiled=True)
    _compare(eager, compiled, "fp32")  # the state dict holds running_mean/var and the counter
    assert not prof.host_ops
    fw = trnsim.backend.compile_stats().graphs[0].aot_ops["forward"]
    assert "aten.native_batch_norm.default" in fw and "aten.add_.Tensor" in fw
    assert "aten.copy_.default" not in fw

    net = copy.deepcopy(model).to(dev).eval()
    x = batch[0].to(dev)
    with torch.no_grad(), trnsim.profile_torch() as prof:
        got = torch.compile(net, backend="trn")(x)
    torch.testing.assert_close(got.cpu(), net(x).cpu(), rtol=0, atol=0)
    assert not prof.host_ops
    assert "aten.native_batch_norm.default" in trnsim.backend.compile_stats().graphs[-1].aot_ops[
        "inference"]
