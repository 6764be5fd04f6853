"""User NKI kernels on device tensors: both API generations, zero-copy reads and writes,
returned HBM tensors, nki_op custom ops (eager, backward, fake tensors), wrap_nki grids and
LNC=2, and the torch_neuronx alias."""

from __future__ import annotations

import pytest
import torch

import trnsim

trnsim.install_nki_aliases()
import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402
from neuronxcc import nki as b1  # noqa: E402
from neuronxcc.nki import language as b1l  # noqa: E402
from trnsim.backend.user_kernels import nki_op, wrap_nki  # noqa: E402


@nki.jit
def add_kernel(a, b):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    ta = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    tb = nl.ndarray(b.shape, b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=ta, src=a)
    nisa.dma_copy(dst=tb, src=b)
    nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.add)
    nisa.dma_copy(dst=out, src=ta)
    return out


@nki.jit
def scale_in_place(x, factor):
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=factor)
    nisa.dma_copy(dst=x, src=t)


@b1.jit
def b1_double(a):
    out = b1l.ndarray(a.shape, dtype=a.dtype, buffer=b1l.shared_hbm)
    b1l.store(out, value=b1l.load(a) * 2)
    return out


def test_kernel_reads_what_torch_wrote_and_torch_reads_what_the_kernel_wrote(dev):
    a, b = torch.randn(128, 64), torch.randn(128, 64)
    ad, bd = a.to(dev), b.to(dev)
    out = add_kernel(ad, bd)
    assert isinstance(out, torch.Tensor) and out.device.type == dev
    assert torch.allclose(out.cpu(), a + b)
    scale_in_place(ad, 3.0)  # no copy: the kernel wrote the tensor's own bytes
    assert torch.allclose(ad.cpu(), a * 3)


def test_returned_block_becomes_the_tensors_storage(dev, rt):
    mod = getattr(torch, dev)
    x = torch.ones(64, 32, device=dev)
    before = mod.memory_allocated()
    out = add_kernel(x, x)
    ptr = out.untyped_storage().data_ptr()
    assert rt.base <= ptr < rt.base + rt.hbm.capacity_bytes
    assert mod.memory_allocated() == before + 64 * 32 * 4
    del out
    assert mod.memory_allocated() == before


def test_beta1_kernel_on_device_tensors(dev):
    x = torch.randn(16, 8)
    out = b1_double(x.to(dev))
    assert out.device.type == dev and torch.allclose(out.cpu(), 2 * x)


def test_views_and_bf16_inputs(dev):
    x = torch.randn(128, 96).to(torch.bfloat16)
    d = x.to(dev)
    out = add_kernel(d[:, :32], d[:, 32:64])  # strided views, read in place
    ref = (x[:, :32].float() + x[:, 32:64].float()).bfloat16()
    assert out.dtype == torch.bfloat16 and torch.equal(out.cpu(), ref)


def test_launch_advances_the_device_clock(dev):
    mod = getattr(torch, dev)
    t0 = mod.simulated_time_ns()
    add_kernel(torch.ones(128, 8, device=dev), torch.ones(128, 8, device=dev))
    assert mod.simulated_time_ns() > t0


def test_cpu_tensor_among_device_tensors_is_refused(dev):
    with pytest.raises(RuntimeError, match=f"must be on {dev}:0"):
        add_kernel(torch.ones(4, 4, device=dev), torch.ones(4, 4))


@nki_op("trnsim_test::add", mutates_args={})
def op_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return add_kernel(x, y)


def _setup(ctx, inputs, output):
    pass


def _backward(ctx, grad):
    return grad, grad * 2


op_add.register_autograd(_backward, setup_context=_setup)


@nki_op("trnsim_test::scale_", mutates_args={"x"})
def op_scale_(x: torch.Tensor, factor: float) -> None:
    scale_in_place(x, factor)


def test_nki_op_eager_and_backward(dev):
    x = torch.randn(128, 16, device=dev, requires_grad=True)
    y = torch.randn(128, 16, device=dev, requires_grad=True)
    z = torch.ops.trnsim_test.add(x, y)
    assert torch.allclose(z.detach().cpu(), (x + y).detach().cpu())
    (z * 1.0).sum().backward()
    assert torch.equal(x.grad.cpu(), torch.ones(128, 16))
    assert torch.equal(y.grad.cpu(), torch.full((128, 16), 2.0))


def test_nki_op_mutating(dev):
    x = torch.ones(128, 4, device=dev)
    torch.ops.trnsim_test.scale_(x, 5.0)
    assert torch.equal(x.cpu(), torch.full((128, 4), 5.0))


def test_nki_op_fake_tensors_give_shapes(dev):
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    x = torch.randn(128, 16, device=dev)
    with FakeTensorMode() as mode:
        fx = mode.from_tensor(x)
        r = torch.ops.trnsim_test.add(fx, fx)
    assert isinstance(r, FakeTensor) and r.shape == (128, 16) and r.device.type == dev


@nki.jit
def lnc_add(a, b):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    half = a.shape[0] // 2
    r0 = nl.program_id(0) * half
    t = nl.ndarray((half, a.shape[1]), a.dtype, buffer=nl.sbuf)
    u = nl.ndarray((half, a.shape[1]), a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a[r0:r0 + half, :])
    nisa.dma_copy(dst=u, src=b[r0:r0 + half, :])
    nisa.tensor_tensor(dst=t, data1=t, data2=u, op=nl.add)
    nisa.dma_copy(dst=out[r0:r0 + half, :], src=t)
    return out


def test_wrap_nki_lnc2_launch(dev):
    a, b = torch.randn(256, 32), torch.randn(256, 32)
    out = wrap_nki(lnc_add)[2](a.to(dev), b.to(dev))
    assert torch.allclose(out.cpu(), a + b)


@b1.jit
def b1_spmd_add(a, b):
    out = b1l.ndarray(a.shape, dtype=a.dtype, buffer=b1l.shared_hbm)
    i = b1l.program_id(0) * 64 + b1l.arange(64)[:, None]
    j = b1l.arange(a.shape[1])[None, :]
    b1l.store(out[i, j], value=b1l.load(a[i, j]) + b1l.load(b[i, j]))
    return out


def test_wrap_nki_beta1_spmd_grid(dev):
    a, b = torch.randn(128, 16), torch.randn(128, 16)
    out = wrap_nki(b1_spmd_add)[2](a.to(dev), b.to(dev))
    assert torch.allclose(out.cpu(), a + b)


def test_torch_neuronx_alias_exposes_the_entry_points():
    import torch_neuronx
    from torch_neuronx.nki_hop import wrap_nki as hop_wrap

    assert torch_neuronx.nki_op is nki_op
    assert hop_wrap is wrap_nki
    torch_neuronx.synchronize()


@nki.jit
def as_packed_fp8(x):
    """x: uint32 words holding 4 fp8 each (AWS's MX tutorial packs MX data so), viewed as
    float8_e5m2_x4 and returned in that dtype."""
    v = x.ap(dtype=nl.float8_e5m2_x4, pattern=[[x.shape[1], x.shape[0]], [1, x.shape[1]]],
             offset=0)
    t = nl.ndarray(v.shape, dtype=nl.float8_e5m2_x4, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=v)
    out = nl.ndarray(v.shape, dtype=nl.float8_e5m2_x4, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_uint32_device_tensors_and_packed_dtypes_pass_through_kernels(dev):
    """uint16/uint32 device tensors are kernel arguments; a result in an NKI dtype torch lacks
    comes back as the unsigned integers of its size (its bits)."""
    words = torch.randint(0, 2**31, (128, 64), dtype=torch.int64).to(torch.uint32)
    out = as_packed_fp8(words.to(dev))
    assert out.dtype == torch.uint32 and out.device.type == dev
    assert torch.equal(out.cpu().view(torch.int32), words.view(torch.int32))


def test_a_kernel_argument_without_an_nki_dtype_is_named(dev):
    with pytest.raises(TypeError, match=r"arg0: a torch.float64 tensor of shape \[4, 4\] has no "
                                        r"NKI dtype \(kernels take float32, bfloat16"):
        add_kernel(torch.ones(4, 4, dtype=torch.float64, device=dev),
                   torch.ones(4, 4, dtype=torch.float64, device=dev))
