"""torch.save / torch.load(map_location=) round trips, Storage.trn(), and torch.autocast with
bf16 on the device."""

from __future__ import annotations

import io

import pytest
import torch
import torch.nn.functional as F


def _roundtrip(obj, **load_kwargs):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, **load_kwargs)


def test_save_load_round_trip_keeps_views_devices_and_bytes(dev):
    x = torch.randn(4, 6).to(torch.bfloat16)
    d = x.to(dev)
    back = _roundtrip({"w": d, "v": d[1:, 2:], "i": torch.arange(5).to(dev)})
    assert back["w"].device.type == dev and torch.equal(back["w"].cpu(), x)
    assert torch.equal(back["v"].cpu(), x[1:, 2:])
    assert back["v"].untyped_storage().data_ptr() == back["w"].untyped_storage().data_ptr()
    assert torch.equal(back["i"].cpu(), torch.arange(5))


@pytest.mark.parametrize("where", ["cpu", "trn", "device"])
def test_map_location(dev, where):
    loc = {"cpu": "cpu", "trn": dev, "device": torch.device(dev)}[where]
    m = torch.nn.Linear(3, 2)
    sd = _roundtrip(m.state_dict(), map_location=loc)
    want = "cpu" if where == "cpu" else dev
    assert all(v.device.type == want for v in sd.values())
    m2 = torch.nn.Linear(3, 2).to(want)
    m2.load_state_dict(sd)
    assert torch.equal(m2.weight.cpu(), m.weight.detach())


def test_cpu_checkpoint_loads_onto_the_device(dev):
    sd = _roundtrip({"a": torch.ones(3)}, map_location=dev)
    assert sd["a"].device.type == dev and sd["a"].cpu().tolist() == [1.0, 1.0, 1.0]


def test_storage_method_moves_bytes(dev):
    x = torch.arange(10, dtype=torch.int32)
    st = getattr(x.untyped_storage(), dev)()
    assert st.device.type == dev and st.nbytes() == 40
    t = torch.empty(0, dtype=torch.int32, device=dev).set_(st)
    assert t.cpu().tolist() == list(range(10))


def test_autocast_bf16_policies(dev):
    x, w = torch.randn(8, 16).to(dev), torch.randn(4, 16).to(dev)
    with torch.autocast(device_type=dev, dtype=torch.bfloat16):
        y = F.linear(x, w)
        s = torch.softmax(y, -1)
        e = torch.exp(y)
        ls = F.log_softmax(y, -1)
        z = x + x  # not listed: unchanged
    assert y.dtype == torch.bfloat16
    assert s.dtype == e.dtype == ls.dtype == torch.float32
    assert z.dtype == torch.float32
    ref = F.linear(x.cpu().bfloat16(), w.cpu().bfloat16())
    assert torch.equal(y.cpu(), ref)


def test_autocast_backward_casts_gradients_back(dev):
    w = torch.randn(4, 16, device=dev, requires_grad=True)
    x = torch.randn(8, 16, device=dev)
    with torch.autocast(device_type=dev, dtype=torch.bfloat16):
        loss = F.linear(x, w).float().pow(2).mean()
    loss.backward()
    assert w.grad.dtype == torch.float32 and w.grad.shape == w.shape


def test_autocast_off_changes_nothing(dev):
    x = torch.randn(4, 4).to(dev)
    with torch.autocast(device_type=dev, dtype=torch.bfloat16, enabled=False):
        assert (x @ x).dtype == torch.float32
