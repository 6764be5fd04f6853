"""A TorchNeuron-style script: an NKI kernel as a PyTorch custom op on the `neuron` device.

Runs unchanged on a Trainium host with torch-neuronx, and here with
    TRNSIM_DEVICE=neuron trnsim run examples/torch/nki_custom_op.py
(`trnsim run` makes `nki` and `torch_neuronx` resolve to trnsim's).
"""

import nki
import nki.isa as nisa
import nki.language as nl
import torch
from torch_neuronx import nki_op

device = "neuron" if hasattr(torch, "neuron") else "trn"


@nki.jit
def scaled_add_kernel(x, y, scale):
    """out = x * scale + y for a [P <= 128, F] pair of tensors."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    tx = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    ty = nl.ndarray(y.shape, y.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tx, src=x)
    nisa.dma_copy(dst=ty, src=y)
    nisa.scalar_tensor_tensor(dst=tx, data=tx, op0=nl.multiply, operand0=scale, op1=nl.add,
                              operand1=ty)
    nisa.dma_copy(dst=out, src=tx)
    return out


@nki_op("demo::scaled_add", mutates_args={})
def scaled_add(x: torch.Tensor, y: torch.Tensor, scale: float) -> torch.Tensor:
    return scaled_add_kernel(x, y, scale)


def _setup(ctx, inputs, output):
    ctx.scale = inputs[2]


def _backward(ctx, grad):
    return grad * ctx.scale, grad, None


scaled_add.register_autograd(_backward, setup_context=_setup)

if __name__ == "__main__":
    torch.manual_seed(0)
    x = torch.randn(128, 256, device=device, requires_grad=True)
    y = torch.randn(128, 256, device=device)
    out = scaled_add(x, y, 3.0)
    out.sum().backward()
    expect = x.detach().cpu() * 3.0 + y.cpu()
    print("values match:", torch.allclose(out.detach().cpu(), expect, atol=1e-6))
    print("grad match:", bool((x.grad.cpu() == 3.0).all()))
    mod = getattr(torch, device)
    print(f"simulated device time: {mod.simulated_time_ns() / 1000:.2f} us")
