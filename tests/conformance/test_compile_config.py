"""nki.compiler.CompileConfig / SpecializationConfig (NKI docs, SDK 2.33): the options and
their documented defaults, the documented configuration errors, nested kernels, and what the
configuration changes in trnsim's timing (the order; never the values)."""

from __future__ import annotations

import re
import warnings

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from nki.compiler import (
    AddressRotation,
    Allocation,
    AllocationMode,
    CompileConfig,
    OptLevel,
    SchedulingHeuristic,
    SpecializationConfig,
)

from trnsim.errors import ConstraintError, SimulationWarning
from trnsim.timing.profile import profile

LINEAR = Allocation.LINEAR


def _plus_one(x):
    """x + 1 through SBUF: load, a VectorE tensor_scalar, store."""
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    r = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=r, data=t, op0=nl.add, operand0=1.0)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=r)
    return out


def _rows_of_exp(x):
    """Row blocks loaded, exp'd and stored: loads, ScalarE work and stores to reorder."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        t = nl.ndarray((128, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[i * 128:(i + 1) * 128, :])
        e = nl.ndarray((128, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.activation(dst=e, op=nl.exp, data=t)
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=e)
    return out


def test_the_documented_defaults():
    c = CompileConfig()
    assert c.allocation is Allocation.COLORING and c.scheduling is False
    assert c.opt_level is OptLevel.O1 and c.address_rotation is AddressRotation.AUTO
    assert c.experimental_allocation_mode is None
    assert c.experimental_scheduling_heuristic is None
    assert c.nki_alloc_fallback is True and c.prefetch_auto is False
    assert c.changed() == {}
    assert SpecializationConfig().allow_nested_config_override is False
    assert [m.name for m in SchedulingHeuristic] == ["ASAP", "CRITICAL_PATH", "DMA_PREFETCH",
                                                      "TRIVIAL"]
    assert [m.name for m in AllocationMode] == ["RING", "FAST", "MAX_REUSE"]
    assert [m.name for m in OptLevel] == ["O0", "O1", "O2"]


def test_a_configured_kernel_computes_the_same_values():
    x = np.random.default_rng(0).standard_normal((128, 512)).astype(np.float32)
    k = nki.jit(compile_config=CompileConfig(allocation=LINEAR, prefetch_auto=True))(_plus_one)
    np.testing.assert_array_equal(k(x), x + np.float32(1))
    assert k.compile_config.prefetch_auto


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"scheduling": True},
     "scheduling=True needs allocation=Allocation.LINEAR, got allocation=Allocation.COLORING"),
    ({"prefetch_auto": True},
     "prefetch_auto acts only when NKI allocates; it cannot be set with "
     "allocation=Allocation.COLORING."),
    ({"split_reused_buffers": True}, "split_reused_buffers acts only when NKI allocates"),
    ({"experimental_allocation_mode": AllocationMode.RING},
     "experimental_allocation_mode acts only when NKI allocates"),
    ({"allocation": LINEAR, "experimental_scheduling_heuristic": SchedulingHeuristic.TRIVIAL},
     "experimental_scheduling_heuristic acts only when NKI schedules; set scheduling=True as "
     "well."),
])
def test_options_outside_their_mode_are_value_errors(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        CompileConfig(**kwargs)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"allocation": "linear"}, "allocation must be an nki.compiler.Allocation"),
    ({"allocation": LINEAR, "experimental_allocation_mode": "ring"},
     "experimental_allocation_mode must be an nki.compiler.AllocationMode or None"),
    ({"opt_level": 2}, "opt_level must be an nki.compiler.OptLevel"),
    ({"address_rotation": True}, "address_rotation must be an nki.compiler.AddressRotation"),
    ({"dma_copy_elim": "False"}, "dma_copy_elim must be a bool"),
])
def test_wrong_types_are_type_errors(kwargs, message):
    with pytest.raises(TypeError, match=re.escape(message)):
        CompileConfig(**kwargs)


def test_config_errors_name_the_users_line():
    with pytest.raises(ValueError) as e:
        CompileConfig(prefetch_auto=True)  # THE CONFIG LINE
    assert "test_compile_config.py" in str(e.value) and "THE CONFIG LINE" in str(e.value)
    with pytest.raises(TypeError) as e:
        CompileConfig(allocation="linear")  # THE TYPE LINE
    assert "THE TYPE LINE" in str(e.value)


def test_flags_take_zero_and_one():
    assert CompileConfig(dma_copy_elim=1).dma_copy_elim is True
    assert CompileConfig(allocation=LINEAR, prefetch_auto=np.bool_(True)).prefetch_auto is True


def test_jit_refuses_what_is_not_a_config():
    with pytest.raises(TypeError, match=r"compile_config must be an nki\.compiler\.CompileConfig"):
        nki.jit(compile_config={"allocation": "linear"})
    with pytest.raises(TypeError, match=r"specialization_config must be an nki\.compiler"):
        nki.jit(specialization_config=CompileConfig())


def _outer_calling(inner, outer_config=None, spec=None):
    def outer(x):
        return inner(x)

    return nki.jit(compile_config=outer_config, specialization_config=spec)(outer)


def test_a_sub_kernel_with_its_own_config_is_refused_with_the_line():
    inner = nki.jit(compile_config=CompileConfig(allocation=LINEAR))(_plus_one)
    x = np.zeros((128, 64), np.float32)
    with pytest.raises(ConstraintError) as e:
        _outer_calling(inner)(x)
    text = str(e.value)
    assert "Kernel '_plus_one' is called from inside another kernel but sets compile config" \
        in text
    assert "test_compile_config.py" in text and "allow_nested_config_override=True" in text


def test_a_sub_kernel_config_may_be_overridden_or_agree():
    inner = nki.jit(compile_config=CompileConfig(allocation=LINEAR))(_plus_one)
    x = np.zeros((128, 64), np.float32)
    with pytest.warns(SimulationWarning, match="inlined under the top-level kernel's config"):
        out = _outer_calling(inner, spec=SpecializationConfig(
            allow_nested_config_override=True))(x)
    np.testing.assert_array_equal(out, x + 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        same = _outer_calling(inner, outer_config=CompileConfig(allocation=LINEAR))(x)
    np.testing.assert_array_equal(same, x + 1)


def _latency(config, x, chip="trn2", **kw):
    k = nki.jit(_rows_of_exp) if config is None else nki.jit(compile_config=config)(_rows_of_exp)
    return profile(k, x, chip=chip, values=False, **kw)


def test_the_scheduling_heuristics_change_the_order_not_the_values():
    x = np.zeros((1024, 512), np.float32)
    default = _latency(None, x)
    as_written = _latency(None, x, reorder=False)

    def sched(h):
        return CompileConfig(allocation=LINEAR, scheduling=True,
                             experimental_scheduling_heuristic=h)

    # No NKI scheduling, NKI's ASAP and a bare LINEAR: trnsim's compiler order.
    for c in (CompileConfig(), CompileConfig(allocation=LINEAR), sched(None),
              sched(SchedulingHeuristic.ASAP)):
        assert _latency(c, x).latency_ns == default.latency_ns
    # TRIVIAL: the kernel's program order, as reorder=False times it.
    trivial = _latency(sched(SchedulingHeuristic.TRIVIAL), x)
    assert trivial.latency_ns == as_written.latency_ns > default.latency_ns
    for h in (SchedulingHeuristic.CRITICAL_PATH, SchedulingHeuristic.DMA_PREFETCH):
        assert _latency(sched(h), x).latency_ns < as_written.latency_ns
    r = np.random.default_rng(1).standard_normal((256, 64)).astype(np.float32)
    k = nki.jit(compile_config=sched(SchedulingHeuristic.CRITICAL_PATH))(_rows_of_exp)
    np.testing.assert_allclose(k(r), np.exp(r), rtol=1e-5)


def test_a_configured_kernel_on_device_tensors_is_timed_in_its_order():
    torch = pytest.importorskip("torch")
    import trnsim

    x = torch.zeros((1024, 512), dtype=torch.float32)
    trivial = CompileConfig(allocation=LINEAR, scheduling=True,
                            experimental_scheduling_heuristic=SchedulingHeuristic.TRIVIAL)
    chip = trnsim.backend.runtime.chip.name  # the device's chip (TRNSIM_CHIP)
    want = {None: _latency(None, x.numpy(), chip).latency_ns,
            "trivial": _latency(None, x.numpy(), chip, reorder=False).latency_ns}
    assert want["trivial"] > want[None]
    xd = x.to("trn")
    for key, config in ((None, None), ("trivial", trivial)):
        k = nki.jit(_rows_of_exp) if config is None else nki.jit(compile_config=config)(
            _rows_of_exp)
        with trnsim.profile_torch() as p:
            out = k(xd)
        assert torch.equal(out.cpu(), torch.ones_like(x))
        (launch,) = p.launches
        assert launch.latency_ns == pytest.approx(want[key])


def test_linear_allocation_modes_time_as_the_allocation_rule():
    from trnsim.timing.compiler import CompilerRules

    x = np.zeros((1024, 512), np.float32)
    plain = nki.jit(_rows_of_exp)
    for mode in AllocationMode:
        config = CompileConfig(allocation=LINEAR, experimental_allocation_mode=mode)
        want = profile(plain, x, chip="trn2", values=False,
                       rules=CompilerRules(allocation=mode.value))
        got = _latency(config, x)
        assert got.latency_ns == want.latency_ns, mode
    # LINEAR without a mode keeps the traced addresses: the default timeline.
    assert _latency(CompileConfig(allocation=LINEAR), x).latency_ns == _latency(None, x).latency_ns


def _scalar_ops(x):
    """Independent tensor_scalar and tensor_copy ops left to the compiler's engine choice."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    for _ in range(6):
        u = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=u, data=t, op0=nl.multiply, operand0=2.0)
        v = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=v, src=t)
    nisa.dma_copy(dst=out, src=u)
    return out


def test_linear_opt_levels_place_engines_as_documented():
    from trnsim.timing.compiler import CompilerRules

    x = np.zeros((128, 2048), np.float32)
    plain = nki.jit(_scalar_ops)

    def engines(p):  # (opcode, the queue it was timed on)
        return sorted({(ins.opcode, p.timeline.queue[ins.index][1]) for ins in p.program
                       if ins.opcode in ("tensor_scalar", "tensor_copy")})

    def run(config=None, rules=None):
        k = plain if config is None else nki.jit(compile_config=config)(_scalar_ops)
        return profile(k, x, chip="trn2", values=False, rules=rules)

    everything = run()  # the current flow: every engine=unknown instruction placed
    o0 = run(CompileConfig(allocation=LINEAR, opt_level=OptLevel.O0))
    o1 = run(CompileConfig(allocation=LINEAR))
    balanced = run(CompileConfig(allocation=LINEAR, engine_balancing=True))
    assert o0.latency_ns == run(rules=CompilerRules(place_unknown_engine=False)).latency_ns
    copies_only = CompilerRules(place_opcodes=frozenset({"tensor_copy"}))
    assert o1.latency_ns == run(rules=copies_only).latency_ns
    assert balanced.latency_ns == everything.latency_ns
    # O1 keeps every tensor_scalar on its default engine, and moves copies.
    assert {e for op, e in engines(o1) if op == "tensor_scalar"} == \
        {e for op, e in engines(o0) if op == "tensor_scalar"}
    assert len({e for op, e in engines(everything) if op == "tensor_scalar"}) > 1


def test_any_option_values_build_a_config_or_raise_the_documented_errors():
    """Fuzzed option values (members, None, strings, numbers): the config is built, or the
    error is the documented ValueError / TypeError with the user's line; never another."""
    from dataclasses import fields

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from trnsim.errors import ConfigTypeError, ConfigValueError

    names = [f.name for f in fields(CompileConfig)]
    values = st.one_of(
        st.none(), st.booleans(), st.integers(-2, 3), st.text(max_size=4),
        st.sampled_from([*Allocation, *AllocationMode, *SchedulingHeuristic, *AddressRotation,
                         *OptLevel]),
    )

    @settings(max_examples=300, deadline=None)
    @given(st.dictionaries(st.sampled_from(names), values, max_size=5))
    def check(kwargs):
        error = None
        try:
            c = CompileConfig(**kwargs)
        except (ConfigValueError, ConfigTypeError) as e:
            error = str(e)
        if error is not None:
            assert "test_compile_config.py" in error
            return
        c.timing_options()  # a built config always has a timing meaning
        assert c == CompileConfig(**kwargs)

    check()
