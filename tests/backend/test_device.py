"""The trn device: tensors in the simulated HBM, views, copies, printing, seeds, the device
module (torch.trn), memory statistics, simulated-time events, torch.accelerator."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
import trnsim.backend
from trnsim.backend import storage

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int32, torch.int8,
          torch.uint8, torch.bool, torch.float64]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_round_trip_keeps_bytes(dev, dtype):
    x = (torch.randn(5, 7) * 100).to(dtype)
    d = x.to(dev)
    assert d.device == torch.device(dev, 0)
    assert d.dtype == dtype and d.shape == x.shape
    assert torch.equal(d.cpu(), x)


def test_storage_lives_in_the_simulated_hbm(dev, rt):
    d = torch.arange(12.0).to(dev)
    ptr = d.untyped_storage().data_ptr()
    assert rt.base <= ptr < rt.base + rt.hbm.capacity_bytes
    off = ptr - rt.base
    raw = rt.hbm.data[off:off + 48].view("float32")
    assert raw.tolist() == list(map(float, range(12)))


def test_views_share_storage_and_write_through(dev, reference_mode):
    x = torch.arange(24.0).reshape(4, 6)
    d = x.to(dev)
    v = d[1:, ::2]
    assert v.stride() == (6, 2) and v.storage_offset() == 6
    assert v.untyped_storage().data_ptr() == d.untyped_storage().data_ptr()
    v.add_(100)
    x[1:, ::2] += 100
    assert torch.equal(d.cpu(), x)
    t = d.t()
    assert torch.equal(t.cpu(), x.t())
    assert torch.equal(d.view(-1)[5:9].cpu(), x.view(-1)[5:9])


VIEWS = {"diagonal": lambda t: t.diagonal(), "transposed": lambda t: t.t(),
         "strided": lambda t: t[1:, ::2], "column": lambda t: t[:, 2]}


@pytest.mark.parametrize("view", sorted(VIEWS))
@pytest.mark.parametrize("name", ["add_.Scalar", "sub_.Scalar", "mul_.Scalar", "div_.Scalar",
                                  "add_.Tensor", "mul_.Tensor"])
def test_in_place_kernels_write_a_view_where_it_lies(dev, kernel_mode, name, view):
    """C++ callers (autograd formulas: QR's backward halves a diagonal with mul_.Scalar) reach
    the Scalar overloads, which ATen implements as out= with out=self: the view keeps its
    strides and only its elements change."""
    packet, overload = name.split(".")
    fn = getattr(getattr(torch.ops.aten, packet), overload)
    x = torch.randn(6, 6)
    d = x.to(dev)
    v, vd = VIEWS[view](x), VIEWS[view](d)
    other = 0.5 if overload == "Scalar" else torch.tensor(0.5)
    fn(v, other)
    fn(vd, other.to(dev) if isinstance(other, torch.Tensor) else other)
    assert vd.stride() == v.stride() and vd.storage_offset() == v.storage_offset()
    assert torch.equal(d.cpu(), x)


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_host_in_place_ops_write_a_view_where_it_lies(dev, kernel_mode, view):
    """Complex tensors take the host path (no engine holds them): same rule there."""
    x = torch.randn(6, 6, dtype=torch.complex64)
    d = x.to(dev)
    v, vd = VIEWS[view](x), VIEWS[view](d)
    torch.ops.aten.mul_.Scalar(v, 2)
    torch.ops.aten.mul_.Scalar(vd, 2)
    assert vd.stride() == v.stride()
    assert torch.equal(d.cpu(), x)


def test_conjugate_and_negative_views_copy_with_their_bits(dev, kernel_mode):
    """`z.conj()` is a lazy view (a bit, no copy). Copying one off the device used to recurse
    without bound in C++ (PyTorch's fallback for the bit clones, and clone copies: a
    segfault), and host ops read the bytes without the bit."""
    z = torch.randn(5, 10, 7, dtype=torch.complex64).transpose(1, 2)
    zd = z.to(dev)
    for f in (lambda t: t.conj(), lambda t: t.conj().imag, lambda t: t.conj().clone(),
              lambda t: t.conj() * 2, lambda t: t.conj().imag.sum(), lambda t: t.conj().real):
        got, want = f(zd), f(z)
        assert got.is_conj() == want.is_conj() and got.is_neg() == want.is_neg()
        torch.testing.assert_close(got.cpu(), want, rtol=1e-6, atol=1e-6)
    back = torch.empty(5, 7, 10, dtype=torch.complex64, device=dev)
    back.copy_(z.conj())
    assert torch.equal(back.cpu(), z.conj().resolve_conj())


def test_an_out_tensor_of_the_right_shape_keeps_its_strides(dev, kernel_mode):
    x = torch.randn(4, 6)
    out, out_d = torch.empty(6, 4).t(), torch.empty(6, 4, device=dev).t()
    torch.add(x, 1, out=out)
    torch.add(x.to(dev), 1, out=out_d)
    assert out_d.stride() == out.stride() == (1, 4)
    assert torch.equal(out_d.cpu(), out)


def test_in_place_through_a_view_keeps_autograd_right(dev, reference_mode):
    a = torch.randn(3, 4, requires_grad=True)
    ad = a.detach().to(dev).requires_grad_()
    for t in (a, ad):
        b = t * 2
        b[0].mul_(3)
        b.sum().backward()
    assert torch.equal(ad.grad.cpu(), a.grad)


def test_module_to_moves_parameters_and_buffers(dev):
    m = torch.nn.BatchNorm1d(3)
    m.to(dev)
    assert all(p.device.type == dev for p in m.parameters())
    assert m.running_mean.device.type == dev
    m.to("cpu")
    assert m.weight.device.type == "cpu"


def test_module_to_moves_parameters_in_place_so_tied_weights_stay_tied(dev, kernel_mode):
    """As on CUDA, Module.to() moves a parameter in place (`param.data = moved`): an LM head
    tied to the embedding stays one Parameter, whose gradient sums both uses, and an
    optimizer made before the move steps the device parameters."""
    torch.manual_seed(0)

    def tied():
        emb, head = torch.nn.Embedding(16, 8), torch.nn.Linear(8, 16, bias=False)
        head.weight = emb.weight
        return torch.nn.ModuleDict({"emb": emb, "head": head})

    cpu, m = tied(), tied()
    m.load_state_dict(cpu.state_dict())
    weight = m.emb.weight
    opt = torch.optim.SGD(m.parameters(), lr=0.5)
    m.to(dev)
    assert m.head.weight is m.emb.weight is weight and weight.device.type == dev
    assert len(list(m.parameters())) == 1
    ids = torch.tensor([[1, 5, 7, 5, 2]])

    def loss(mod, ids):
        return F.cross_entropy(mod.head(torch.tanh(mod.emb(ids)))[0], ids[0])

    loss(cpu, ids).backward()
    loss(m, ids.to(dev)).backward()
    torch.testing.assert_close(weight.grad.cpu(), cpu.emb.weight.grad, rtol=1e-5, atol=1e-6)
    before = weight.detach().cpu()
    opt.step()
    torch.testing.assert_close(weight.detach().cpu(), before - 0.5 * cpu.emb.weight.grad,
                               rtol=1e-5, atol=1e-6)
    m.to("cpu")
    assert m.head.weight is m.emb.weight is weight and weight.device.type == "cpu"


def test_shallow_copy_compatibility_is_upstreams_for_dense_tensors(dev):
    ask = torch._has_compatible_shallow_copy_type
    d = torch.zeros(2, device=dev)
    assert ask(torch.zeros(2), d) and ask(d, torch.zeros(3, dtype=torch.float64))
    assert ask(d, torch.zeros(1, device=dev))
    assert not ask(d, torch.zeros(2, device="meta"))
    assert not ask(d, torch.zeros(2).to_sparse())


def test_printing_matches_cpu_with_the_device_suffix(dev):
    x = torch.tensor([[1.5, -2.0], [3.25, 4.0]])
    d = x.to(dev)
    assert repr(d) == repr(x)[:-1] + f", device='{dev}:0')"
    p = torch.nn.Parameter(d)
    assert "Parameter containing" in repr(p)
    assert "requires_grad=True" in repr(torch.ones(2).to(dev).requires_grad_())
    assert repr(torch.empty(0, 3).to(dev)) == f"tensor([], device='{dev}:0', size=(0, 3))"


def test_a_fake_device_tensor_prints_its_metadata(dev):
    """aot_autograd's structured logging prints FakeTensors of the device (torch.compile):
    they have no bytes to format, so torch's printer shows their metadata."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode() as mode:
        f = mode.from_tensor(torch.ones(2, 3).to(dev))
        text = repr(f)
    assert text.startswith("FakeTensor(") and f"device='{dev}:0'" in text and "(2, 3)" in text


def test_manual_seed_makes_device_randomness_reproducible_and_equal_to_cpu(dev):
    torch.manual_seed(7)
    a = torch.randn(8, device=dev)
    torch.manual_seed(7)
    b = torch.randn(8, device=dev)
    torch.manual_seed(7)
    c = torch.randn(8)
    assert torch.equal(a.cpu(), b.cpu())
    assert torch.equal(a.cpu(), c)
    getattr(torch, dev).manual_seed(3)
    u = torch.rand(4, device=dev)
    torch.manual_seed(3)
    assert torch.equal(u.cpu(), torch.rand(4))


def test_device_module(dev, rt):
    mod = getattr(torch, dev)
    assert mod.is_available() and mod.device_count() == 1 and mod.current_device() == 0
    mod.synchronize()
    free, total = mod.mem_get_info()
    assert total == rt.chip.hbm.capacity_bytes == 144 * (1 << 30)
    assert free == total - mod.memory_reserved()
    assert mod.memory_reserved() >= mod.memory_allocated()
    assert mod.get_device_name().startswith("trnsim trn3")


def test_memory_statistics_follow_allocations(dev):
    mod = getattr(torch, dev)
    mod.reset_peak_memory_stats()
    base = mod.memory_allocated()
    x = torch.empty(1 << 20, device=dev)  # 4 MiB
    assert mod.memory_allocated() == base + (4 << 20)
    peak = mod.max_memory_allocated()
    del x
    assert mod.memory_allocated() == base
    assert mod.max_memory_allocated() == peak >= base + (4 << 20)
    mod.reset_peak_memory_stats()
    assert mod.max_memory_allocated() == base
    text = mod.memory_summary()
    assert "allocated" in text and "trn3" in text


def test_freed_small_blocks_are_cached_until_empty_cache(dev):
    mod = getattr(torch, dev)
    mod.empty_cache()
    base, reserved = mod.memory_allocated(), mod.memory_reserved()
    x = torch.empty(1000, device=dev)  # 4000 bytes: a 4096-byte size class
    ptr = x.data_ptr()
    assert mod.memory_allocated() == base + 4000
    assert mod.memory_reserved() == reserved + 4096
    del x
    assert mod.memory_allocated() == base
    assert mod.memory_reserved() == reserved + 4096  # kept for the next block of its class
    y = torch.empty(1020, device=dev)  # 4080 bytes: the same class, the same block
    assert y.data_ptr() == ptr
    del y
    mod.empty_cache()
    assert mod.memory_reserved() == reserved
    free, total = mod.mem_get_info()
    assert free == total - reserved
    assert "reserved" in mod.memory_summary()


def test_a_full_hbm_reuses_cached_blocks_before_refusing(rt):
    """A block that fits only once the cache is given back is not an out-of-memory error."""
    rt.empty_cache()
    hogs = []
    # Earlier tests of the process may leave gaps between live blocks: fill every gap below
    # the last (the rest of HBM), so the four blocks come from one region, side by side.
    alloc = rt.allocator
    for start in list(alloc._starts)[:-1]:
        size = (alloc._ends[start] - start) // alloc.align * alloc.align
        if size:
            hogs.append(alloc.allocate(0, 1, size)[0])
    handles = [rt.allocate(4096)[0] for _ in range(4)]
    for h in handles:
        rt.free(h)
    assert rt.cached_bytes >= 4 * 4096
    while alloc.largest_free() >= 64:  # every free gap but the cached blocks
        hogs.append(alloc.allocate(0, 1, alloc.largest_free())[0])
    try:
        h, _ = rt.allocate(2 * 4096 + 1024)  # no size class held fits: the cache is given back
        assert rt.cached_bytes == 0
        rt.free(h)
        with pytest.raises(torch.OutOfMemoryError, match="out of HBM"):
            rt.allocate(64 << 20)
    finally:
        for hog in hogs:
            rt.allocator.free(hog)
        rt.empty_cache()


def test_a_view_keeps_the_block_alive(dev):
    mod = getattr(torch, dev)
    base = mod.memory_allocated()
    x = torch.empty(1000, device=dev)
    v = x[10:20]
    del x
    assert mod.memory_allocated() >= base + 4000
    del v
    assert mod.memory_allocated() == base


def test_events_measure_simulated_device_time(dev, kernel_mode):
    mod = getattr(torch, dev)
    a = torch.randn(256, 256, device=dev)
    start, end = mod.Event(enable_timing=True), mod.Event(enable_timing=True)
    start.record()
    t0 = mod.simulated_time_ns()
    b = a @ a
    end.record()
    end.synchronize()
    ms = start.elapsed_time(end)
    assert ms == pytest.approx((mod.simulated_time_ns() - t0) / 1e6)
    assert ms > 0
    with pytest.raises(RuntimeError, match="enable_timing=True"):
        mod.Event().elapsed_time(end)
    del b


def test_streams_are_synchronous_no_ops(dev):
    mod = getattr(torch, dev)
    s = mod.Stream()
    with mod.stream(s):
        x = torch.ones(3, device=dev)
    s.synchronize()
    assert s.query() and mod.current_stream() == mod.default_stream()
    assert x.device.type == dev


def test_torch_accelerator_sees_the_device(dev):
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator().type == dev
    assert torch.accelerator.device_count() == 1
    x = torch.ones(2, device=torch.accelerator.current_accelerator())
    assert x.device.type == dev


def test_empty_strided_and_resize(dev, rt):
    t = torch.empty_strided((3, 4), (1, 3), device=dev)
    assert t.stride() == (1, 3)
    t.resize_(10, 10)
    assert t.shape == (10, 10) and t.is_contiguous()
    assert storage.storage_nbytes([10, 10], [10, 1], 4) <= t.untyped_storage().nbytes()


def test_modes_switch_at_run_time(dev, rt):
    mod = getattr(torch, dev)
    old = mod.get_mode()
    try:
        mod.set_mode("reference")
        assert rt.mode == "reference"
        with pytest.raises(ValueError, match="kernel, reference"):
            mod.set_mode("fast")
    finally:
        mod.set_mode(old)


def test_register_is_idempotent():
    assert trnsim.backend.register() is trnsim.backend.runtime


def test_pinned_memory_for_the_device(dev):
    """pin_memory() and DataLoader(pin_memory=True) pin for the current accelerator, this
    device: a contiguous host copy with the tensor's values (PyTorch's pinned allocator is
    C++-only; every pin failed once the device was registered, CPU-only code's too)."""
    x = torch.arange(6.0).view(2, 3).t().requires_grad_()
    p = x.pin_memory()
    assert p.device.type == "cpu" and p.is_contiguous() and torch.equal(p, x)
    p.sum().backward()
    assert torch.equal(x.grad, torch.ones(3, 2))
    assert torch.equal(x.detach().pin_memory(dev), x.detach())
    ds = torch.utils.data.TensorDataset(torch.arange(12.0).view(6, 2), torch.arange(6))
    batches = list(torch.utils.data.DataLoader(ds, batch_size=4, pin_memory=True))
    assert torch.equal(batches[0][0], ds.tensors[0][:4]) and torch.equal(batches[1][1],
                                                                        ds.tensors[1][4:])
    with pytest.raises(RuntimeError, match=f"accelerator is '{dev}'"):
        x.detach().pin_memory("cuda")


def test_non_blocking_copies_to_the_host(dev, kernel_mode):
    """`x.to("cpu", non_blocking=True)` (training loops' loss logging, HF generation) stages
    in pinned memory in PyTorch's _to_copy, which a Python device cannot allocate; the
    device's copies are synchronous, so it is the ordinary copy."""
    x = torch.randn(3, 4)
    d = x.to(dev, non_blocking=True)
    assert torch.equal(d.to("cpu", non_blocking=True), x)
    assert torch.equal(d.t().to("cpu", torch.float64, non_blocking=True), x.t().double())
    assert d.t().to(torch.bfloat16).stride() == x.t().to(torch.bfloat16).stride()
    a = torch.randn(3, requires_grad=True)
    a.to(dev).to(torch.bfloat16).float().sum().backward()
    assert torch.equal(a.grad, torch.ones(3))
