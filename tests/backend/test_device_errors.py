"""Errors, never silent: an op with no implementation, the host fallback, mixed devices,
device indices, out of HBM, and a kernel's rule violation (named with the op and shapes)."""

from __future__ import annotations

import warnings

import pytest
import torch
from trnsim.backend.dispatch import FallbackWarning
from trnsim.backend.launch import DeviceOpError, launch

from trnsim.errors import UnsupportedError

# An op no registry entry serves (a real ATen op with a CPU kernel): the catch-all handles it.
# PyTorch's own test op (a copy of its input on the CPU): no device will register it.
UNREGISTERED = "aten::_foobar"
_A = torch.randn(3, 3)


def _foobar(dev):
    return torch.ops.aten._foobar(_A.to(dev))


def test_unimplemented_op_names_the_op_and_how_to_opt_in(dev):
    with pytest.raises(UnsupportedError) as e:
        _foobar(dev)
    msg = str(e.value)
    assert UNREGISTERED in msg
    assert f"for the '{dev}' device" in msg
    assert "TRNSIM_FALLBACK=cpu" in msg
    assert "[3, 3] float32" in msg
    assert isinstance(e.value, NotImplementedError)


def test_host_fallback_runs_warns_once_and_counts(dev, rt, cpu_fallback):
    mod = getattr(torch, dev)
    before = mod.fallback_ops().get(UNREGISTERED, 0)
    rt.warned.discard(UNREGISTERED)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = _foobar(dev)
        _foobar(dev)
    hits = [x for x in w if issubclass(x.category, FallbackWarning)]
    assert len(hits) == 1
    assert UNREGISTERED in str(hits[0].message) and "TRNSIM_FALLBACK=cpu" in str(hits[0].message)
    assert mod.fallback_ops()[UNREGISTERED] == before + 2
    assert out.device.type == dev and out.shape == (3, 3)
    assert torch.equal(out.cpu(), _A)


def test_mixing_devices_raises_as_cuda_does(dev):
    d = torch.ones(3, device=dev)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device") as e:
        d + torch.ones(3)
    assert f"{dev}:0 and cpu" in str(e.value)
    assert "[3]" in str(e.value)
    # A 0-d CPU tensor is a scalar, as on CUDA.
    assert torch.equal((d + torch.tensor(2.0)).cpu(), torch.full((3,), 3.0))


def test_device_index_other_than_zero_is_refused(dev):
    with pytest.raises(RuntimeError, match=rf"{dev}:1: this process simulates one NeuronCore"):
        torch.ones(2).to(f"{dev}:1")
    with pytest.raises(RuntimeError, match="torchrun"):
        torch.empty(2, device=f"{dev}:1")
    with pytest.raises(ValueError, match=rf"{dev}:3"):
        getattr(torch, dev).set_device(3)


def test_out_of_hbm_raises_out_of_memory_error_with_bytes_and_capacity(dev):
    with pytest.raises(torch.OutOfMemoryError) as e:
        torch.empty(200 * (1 << 30), dtype=torch.uint8, device=dev)
    msg = str(e.value)
    assert "out of HBM" in msg
    assert str(200 * (1 << 30)) in msg  # the requested bytes
    assert str(144 * (1 << 30)) in msg  # the chip's capacity
    assert "trn3" in msg


def test_kernel_rule_violation_names_the_op_and_shapes(dev):
    """A kernel refusing its inputs is re-raised with the ATen op, the tensors' shapes and the
    user's line, the rule's text kept."""
    import trnsim.nki.isa as nisa
    import trnsim.nki.language as nl

    def too_wide(x):  # 300 partitions: beyond pmax
        t = nl.ndarray((300, 4), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)

    x = torch.ones(300, 4, device=dev)
    with pytest.raises(DeviceOpError) as e:
        launch(too_wide, x, aten_op="aten::demo_op", names=("x",))
    msg = str(e.value)
    assert msg.startswith(f"aten::demo_op on {dev} with [300, 4] float32")
    assert "kernel too_wide refused the inputs" in msg
    assert "partition dimension 300 exceeds the 128 partitions" in msg
    assert f"{__file__}:" in msg


def test_float64_runs_on_the_host_and_is_counted(dev, kernel_mode):
    mod = getattr(torch, dev)
    x = torch.randn(4, 4, dtype=torch.float64)
    y = (x.to(dev) @ x.to(dev)).cpu()
    assert torch.allclose(y, x @ x)
    assert any(k.startswith("aten::mm (torch.float64") for k in mod.host_ops())


def test_an_index_out_of_range_is_an_index_error_as_on_the_cpu(dev, kernel_mode):
    """CPU raises IndexError for index_select, embedding and advanced indexing out of range
    (RuntimeError for gather): the device's error is both, and names op, shapes and rule."""
    from trnsim.backend.launch import DeviceIndexError

    w = torch.randn(5, 3).to(dev)
    for f in (lambda: torch.nn.functional.embedding(torch.tensor([0, 7]).to(dev), w),
              lambda: w[torch.tensor([9]).to(dev)],
              lambda: torch.index_select(w, 0, torch.tensor([5]).to(dev))):
        with pytest.raises(IndexError, match="out of bounds") as e:
            f()
        assert isinstance(e.value, DeviceIndexError) and isinstance(e.value, RuntimeError)
    with pytest.raises(RuntimeError, match="aten::gather"):
        torch.gather(w, 1, torch.tensor([[0, 5, 1]]).to(dev))


def test_an_in_place_op_that_would_resize_its_tensor_is_refused(dev, kernel_mode):
    """CPU's addbmm_ resizes a broadcast `self` (a legacy quirk; in-place ops keep their
    shape, as add_ enforces): on the device that would write past the tensor's HBM block, so
    it is refused with add_'s error before anything is written."""
    a, b = torch.randn(5, 5, 5).to(dev), torch.randn(5, 5, 10).to(dev)
    s = torch.zeros(1).to(dev)
    with pytest.raises(RuntimeError, match=r"output with shape \[1\] doesn't match"):
        s.addbmm_(a, b)
    assert torch.equal(s.cpu(), torch.zeros(1))
    c = torch.randn(5, 10)
    cd = c.to(dev)
    c.addbmm_(a.cpu(), b.cpu())
    cd.addbmm_(a, b)
    assert torch.equal(cd.cpu(), c)
