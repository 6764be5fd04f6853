"""torch.compile(backend="trn") as TorchNeuron's backend behaves: graph breaks, recompiles on
new shapes (cached, counted), refusals of dynamic shapes, other modes warned about, user NKI
kernels as single graph nodes forward and backward, errors that name the node and the line."""

from __future__ import annotations

import copy
import inspect
import warnings

import pytest
import torch
import torch._dynamo
import trnsim.backend
from torch._dynamo.exc import BackendCompilerFailed
from trnsim.backend.compile import CompileWarning, reset_compile_stats
from trnsim.backend.user_kernels import nki_op

from trnsim.nki import isa as nisa
from trnsim.nki import jit
from trnsim.nki import language as nl


@pytest.fixture(autouse=True)
def fresh():
    torch._dynamo.reset()
    reset_compile_stats()
    yield
    torch._dynamo.reset()


def _line_of(fn, text: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


def test_graph_break_compiles_two_graphs(dev, kernel_mode):
    def f(x):
        y = torch.tanh(x) * 2
        print_or_not = y.sum().item() > 1e9  # .item() breaks the graph
        return (y + 1) if not print_or_not else y

    x = torch.randn(8, 16, device=dev)
    got = torch.compile(f, backend="trn")(x)
    torch.testing.assert_close(got.cpu(), f(x).cpu(), rtol=0, atol=0)
    stats = trnsim.backend.compile_stats()
    assert stats.compiles == 2 and stats.graph_breaks == 1
    assert stats.graphs[1].frame.startswith("torch_dynamo_resume_in_f")


class _ConvBN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.bn = torch.nn.BatchNorm2d(4, momentum=None)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


def test_graph_break_inside_a_module_runs_the_eager_stretch_untraced(dev, kernel_mode):
    """BatchNorm with momentum=None breaks the graph inside the module (a float() of its
    counter): the stretch between the graphs runs the device's own ops eagerly, which Dynamo
    must not trace as user code (it used to, and failed in the device's meta functions)."""
    torch.manual_seed(0)
    net = _ConvBN()
    eager, compiled = copy.deepcopy(net).to(dev), copy.deepcopy(net).to(dev)
    x = torch.randn(2, 3, 6, 6, device=dev)
    run = torch.compile(compiled, backend="trn")
    for _ in range(2):
        torch.testing.assert_close(run(x).detach().cpu(), eager(x).detach().cpu(), rtol=1e-6,
                                   atol=1e-6)
    for (name, want), got in zip(eager.state_dict().items(), compiled.state_dict().values(),
                                 strict=True):
        torch.testing.assert_close(got.cpu(), want.cpu(), rtol=1e-6, atol=1e-6, msg=name)
    assert trnsim.backend.compile_stats().graph_breaks >= 1


def test_new_shape_recompiles_and_known_shapes_are_cached(dev, kernel_mode):
    lin = torch.nn.Linear(32, 16).to(dev)
    model = torch.compile(lin, backend="trn", fullgraph=True)
    xs = [torch.randn(n, 32, device=dev) for n in (8, 24, 8, 24)]
    for x in xs:
        torch.testing.assert_close(model(x).detach().cpu(), lin(x).detach().cpu(), rtol=0,
                                   atol=0)
    stats = trnsim.backend.compile_stats()
    assert stats.compiles == 2 and stats.recompiles == 1
    assert [g.signature.split(": ")[1] for g in stats.graphs] == ["[8, 32] float32",
                                                                  "[24, 32] float32"]
    assert [g.runs["forward"] for g in stats.graphs] == [2, 2]
    assert stats.cached_runs == 2


def test_dynamic_shapes_are_refused_with_the_function_and_line(dev):
    def scaled(x):
        return x * 3

    x = torch.randn(8, 4, device=dev)
    with pytest.raises(BackendCompilerFailed, match="dynamic shapes are not supported") as e:
        torch.compile(scaled, backend="trn", dynamic=True)(x)
    text = str(e.value)
    assert f"scaled ({__file__}:{_line_of(scaled, 'x * 3')})" in text
    assert "drop dynamic=True" in text

    torch._dynamo.reset()
    y = torch.randn(6, 4, device=dev)
    torch._dynamo.mark_dynamic(y, 0)
    with pytest.raises(BackendCompilerFailed, match=r"l_x_ has shape \[s\d+, 4\]"):
        torch.compile(scaled, backend="trn")(y)


def test_the_default_backend_names_the_devices_backend(dev):
    """Inductor generates no code for the device: the first use of its code generators on a
    graph of device tensors refuses, naming backend="trn" (it failed on a KeyError inside
    inductor); graphs of CPU tensors keep compiling with it in the same process."""
    torch._dynamo.reset()
    lin = torch.nn.Linear(4, 4)
    x = torch.randn(2, 4)
    with pytest.raises(BackendCompilerFailed, match=(
            f"inductor, generates no code for the '{dev}' device: compile with trnsim's "
            f"TorchNeuron-style backend, torch.compile\\(model, backend=\"{dev}\"\\)")):
        torch.compile(copy.deepcopy(lin).to(dev))(x.to(dev))
    torch._dynamo.reset()
    torch.testing.assert_close(torch.compile(lin)(x), lin(x))


def test_other_modes_warn_and_compile_as_default(dev):
    x = torch.randn(4, 4, device=dev)
    with pytest.warns(CompileWarning, match="mode='max-autotune' is not supported; compiling"):
        got = torch.compile(lambda t: t + 1, backend="trn", mode="max-autotune")(x)
    torch.testing.assert_close(got.cpu(), x.cpu() + 1)


def test_options_are_checked(dev):
    x = torch.randn(4, 4, device=dev)
    with pytest.warns(CompileWarning, match="option 'fallback_execution' is not read"):
        torch.compile(lambda t: t * 2, backend="trn",
                      options={"fallback_execution": True})(x)
    torch._dynamo.reset()
    with pytest.raises(BackendCompilerFailed, match="option 'fusion' must be True or False"):
        torch.compile(lambda t: t * 4, backend="trn", options={"fusion": "yes"})(x)


def test_neuron_backend_name_needs_the_alias_mode(dev):
    if dev != "trn":
        pytest.skip("the device is already TorchNeuron's 'neuron'")
    with pytest.raises(BackendCompilerFailed, match="set TRNSIM_DEVICE=neuron"):
        torch.compile(lambda t: t - 1, backend="neuron")(torch.ones(2, device=dev))


@jit
def _scale_kernel(x, s):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=s)
    nisa.dma_copy(dst=out, src=t)
    return out


@nki_op("trnsim_tests::compile_scale", mutates_args={})
def _scale(x: torch.Tensor, s: float) -> torch.Tensor:
    return _scale_kernel(x, s)


def _setup(ctx, inputs, output):
    ctx.s = inputs[1]


def _backward(ctx, grad):
    return _scale(grad, ctx.s), None  # the backward is the same NKI kernel


_scale.register_autograd(_backward, setup_context=_setup)


def test_nki_op_is_one_node_forward_and_backward(dev, kernel_mode):
    def f(x):
        return _scale(torch.tanh(x), 3.0).sum()

    x = torch.randn(64, 32, device=dev, requires_grad=True)
    with trnsim.profile_torch() as prof:
        loss = torch.compile(f, backend="trn")(x)
        loss.backward()
    xe = x.detach().clone().requires_grad_()
    f(xe).backward()
    torch.testing.assert_close(loss.detach().cpu(), f(xe.detach()).cpu(), rtol=0, atol=0)
    torch.testing.assert_close(x.grad.cpu(), xe.grad.cpu(), rtol=0, atol=0)
    ops = trnsim.backend.compile_stats().graphs[0].aot_ops
    assert ops["forward"].count("trnsim_tests.compile_scale.default") == 1
    assert ops["backward"].count("trnsim_tests.compile_scale.default") == 1
    kernels = [r for r in prof.launches if r.kernel == "_scale_kernel"]
    assert len(kernels) == 2
    assert [r.extra["graph_node"].split(":")[0] for r in kernels] == ["g0/fw", "g0/bw"]
    assert all(r.loc.lineno == _line_of(f, "_scale(torch.tanh") for r in kernels)


def test_a_failing_node_names_itself_and_the_users_line(dev, kernel_mode):
    def loss(logits, target):
        return torch.nn.functional.cross_entropy(logits, target)

    logits = torch.randn(8, 5, device=dev)
    bad = torch.tensor([0, 1, 2, 3, 4, 9, 0, 1], device=dev)  # 9: no such class
    with pytest.raises(IndexError) as e:
        torch.compile(loss, backend="trn")(logits, bad)
    notes = "\n".join(getattr(e.value, "__notes__", []))
    assert "in the inference graph, node cross_entropy" in notes
    assert f"{__file__}:{_line_of(loss, 'cross_entropy(logits')}" in notes


def test_compiled_graph_warns_nothing_for_a_plain_model(dev, kernel_mode):
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        model = torch.compile(torch.nn.Linear(8, 8).to(dev), backend="trn")
        model(torch.randn(2, 8, device=dev)).sum().backward()
