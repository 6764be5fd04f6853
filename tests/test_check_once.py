"""NeuronCore.issue checks a passing combination of operands and attributes once per launch
(spec.check_key); anything the rules read that changes is checked again."""

from __future__ import annotations

import warnings

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

import trnsim.core
from trnsim.errors import ConstraintError, SimulationWarning


@pytest.fixture
def check_calls(monkeypatch):
    calls = []
    real = trnsim.core.check_instruction

    def counting(spec, *args, **kwargs):
        calls.append(spec.name)
        return real(spec, *args, **kwargs)

    monkeypatch.setattr(trnsim.core, "check_instruction", counting)
    return calls


def test_a_loop_checks_the_same_tile_slot_once(check_calls):
    def kernel(x):
        t = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        for _ in range(5):
            nisa.activation(dst=t, op=nl.copy, data=t)
        out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    np.testing.assert_array_equal(nki.simulate(kernel)(x), x)
    assert check_calls.count("activation") == 1
    assert check_calls.count("dma_copy") == 2


def test_a_changed_start_partition_is_checked_again(check_calls):
    def kernel(x):
        t = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.activation(dst=t[0:64], op=nl.exp, data=t[0:64])
        nisa.activation(dst=t[64:128], op=nl.exp, data=t[64:128])
        nisa.activation(dst=t[16:48], op=nl.exp, data=t[16:48])  # 32 partitions from 16
        return x

    with pytest.raises(ConstraintError, match="starting at partition 16") as exc:
        nki.simulate(kernel)(np.zeros((128, 64), np.float32))
    assert exc.value.loc.lineno == kernel.__code__.co_firstlineno + 5
    assert check_calls.count("activation") == 3


def test_a_check_that_warned_warns_every_time():
    def kernel(x):
        t = nl.ndarray((128, 4), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        for _ in range(3):
            nisa.activation(
                dst=t,
                op=nl.exp,
                data=t,
                reduce_op=nl.add,
                reduce_cmd=nisa.reduce_cmd.idle,
            )
        return x

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        nki.simulate(kernel)(np.zeros((128, 4), np.float32))
    hits = [
        w
        for w in seen
        if issubclass(w.category, SimulationWarning)
        and "reduce_cmd=idle leaves the accumulators" in str(w.message)
    ]
    assert len(hits) == 3


def test_registers_and_arrays_are_never_remembered():
    from trnsim.spec import check_key

    assert check_key("x", "vector", {}, {"a": 1, "b": (1, 2.0, "s"), "op": np.add}) is not None
    assert check_key("x", "vector", {}, {"a": (1, [2])}) is None
    assert check_key("x", "vector", {}, {"a": [1, 2]}) is None
    assert check_key("x", "vector", {}, {"a": np.zeros(2)}) is None
    assert check_key("x", "vector", {}, {"a": object()}) is None


def test_values_that_compare_equal_but_differ_in_type_are_checked_apart():
    from trnsim import dtypes as dt
    from trnsim.spec import check_key

    def key(v):
        return check_key("x", "vector", {}, {"a": v})

    assert len({key(1), key(1.0), key(True)}) == 3
    assert key((1, 2)) != key((1.0, 2))
    assert key(dt.resolve("float32")) != key("float32")


def test_remembered_checks_keep_each_instructions_recorded_attributes():
    def kernel(x):
        t = nl.ndarray((128, 4), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        for c in (0.0, -0.0, 0.0, 2.5):
            nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=c)
        return x

    from trnsim.timing.profile import profile

    prof = profile(kernel, np.zeros((128, 4), np.float32), chip="trn2", values=False)
    adds = [ins for ins in prof.program if ins.opcode == "tensor_scalar"]
    got = [ins.attrs["operand0"] for ins in adds]
    assert [(v, np.copysign(1.0, v)) for v in got] == [
        (0.0, 1.0),
        (-0.0, -1.0),
        (0.0, 1.0),
        (2.5, 1.0),
    ]
    adds[0].attrs["op0"] = "changed"  # each record owns its attributes
    assert adds[2].attrs["op0"] == "add"


def _old_tensor_key(t):
    """spec._tensor_key before its parts became KeyTokens: the same fields as nested tuples."""
    buf, lay = t.buffer, t.layout
    at = buf.byte_start if buf.space == "psum" else 0
    where = (buf.space, buf.kind, buf.core, buf.partition_start, buf.partitions, at, buf.nbytes)
    if buf.on_chip:
        return (type(t), where, lay.dtype.name, lay.offset, lay.shape, lay.strides)
    return (type(t), where, lay.dtype.name, lay.shape, lay.strides)


def test_tensor_keys_of_tokens_are_equal_exactly_when_their_fields_are():
    """Random views over SBUF, PSUM and HBM buffers: two tensor keys are equal iff the keys of
    plain fields they replace are (so a remembered check is reused for the same cases)."""
    from trnsim import dtypes as dt
    from trnsim.core import Device
    from trnsim.nki.runner import resolve_chip
    from trnsim.nki.tensor import NkiTensor
    from trnsim.spec import _tensor_key

    rng = np.random.default_rng(3)
    device = Device(resolve_chip("trn2"), values=False)  # (a core holds its Device weakly)
    core = device.core(0)
    views = []
    for space in ["sbuf"] * 12 + ["psum"] * 6 + ["hbm"] * 10:  # (8 PSUM banks)
        dtype = [dt.float32, dt.bfloat16][int(rng.integers(2))]
        free = int(rng.choice([64, 128]))
        if space == "hbm":
            v = core.device.allocate_hbm((64, free), dtype)
        else:
            v = core.allocate(space, (int(rng.choice([32, 64])), free), dtype)
        t = NkiTensor(v.buffer, v.layout)
        for _ in range(3):
            a = int(rng.integers(0, 8))
            b = a + int(rng.integers(1, 8))
            views.append(t[:, a:b] if rng.random() < 0.5 else t[0:b, :])
    same = 0
    for x in views:
        for y in views:
            old = _old_tensor_key(x) == _old_tensor_key(y)
            assert (_tensor_key(x) == _tensor_key(y)) == old
            same += old
    assert same > len(views)
