"""Inputs accepted silently before (issue 13.4), each now refused citing its documented rule,
or made exact: a tile kept from an earlier launch, a zero-partition access, Beta-1 nl.nc(n)
beyond the chip's cores, a Beta-1 PSUM tile wider than a bank, and what-if clocks that were
rounded, capped or infinite."""

from __future__ import annotations

import inspect
import textwrap

import neuronxcc.nki as b1
import neuronxcc.nki.language as b1l
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from source_paths import assert_no_internal_path

import trnsim
from trnsim.allocation import HBM
from trnsim.errors import ConstraintError, KernelError, SpecError
from trnsim.nki.runner import run_kernel
from trnsim.timing.scheduler import Scheduler

X = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)


def line_of(fn, marker):
    src, start = inspect.getsourcelines(fn)
    return start + next(i for i, s in enumerate(src) if marker in s)


def located(exc, fn, marker="# BUG"):
    assert exc.value.loc is not None, str(exc.value)
    assert exc.value.loc.lineno == line_of(fn, marker), str(exc.value)
    assert_no_internal_path(str(exc.value))


# ---------------------------------------------------------------- tensors kept past a launch


@pytest.mark.parametrize("space", ["sbuf", "psum", "shared_hbm"])
def test_tensor_kept_from_an_earlier_launch_is_refused(space):
    kept = {}

    def first(a):
        t = nl.ndarray((128, 64), nl.float32, buffer=getattr(nl, space))
        if space == "shared_hbm":
            nisa.dma_copy(dst=t, src=a)
        else:
            nisa.memset(dst=t, value=1.0)
        kept["t"] = t

    def second(a):
        out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
        s = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
        if space == "psum":
            nisa.tensor_copy(dst=s, src=kept["t"])  # BUG psum
        else:
            nisa.dma_copy(dst=s, src=kept["t"])  # BUG dma
        nisa.dma_copy(dst=out, src=s)
        return out

    nki.simulate(first)(X)
    with pytest.raises(KernelError, match="belongs to an earlier kernel launch") as exc:
        nki.simulate(second)(X)
    located(exc, second, "# BUG psum" if space == "psum" else "# BUG dma")
    assert "§2.4" in str(exc.value)


def test_beta1_tile_kept_from_an_earlier_launch_is_refused():
    kept = {}

    def first(a):
        kept["t"] = b1l.load(a)
        out = b1l.ndarray(a.shape, dtype=a.dtype, buffer=b1l.shared_hbm)
        b1l.store(out, kept["t"])
        return out

    def second(a):
        out = b1l.ndarray(a.shape, dtype=a.dtype, buffer=b1l.shared_hbm)
        b1l.store(out, kept["t"])  # BUG
        return out

    b1.jit(first)(X)
    with pytest.raises(KernelError, match="belongs to an earlier kernel launch") as exc:
        b1.jit(second)(X)
    located(exc, second)


def test_hbm_tensor_of_a_long_lived_hbm_crosses_launches():
    """Launches on one HBM (the PyTorch device's) share its tensors: no refusal there."""
    chip = trnsim.load_chip("trn2")
    hbm = HBM(chip.hbm.capacity_bytes, policy="first")
    kept = {}

    def first(a):
        t = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=t, src=a)
        kept["t"] = t

    def second(a):
        s = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=kept["t"])
        nisa.dma_copy(dst=a, src=s)

    src = run_kernel(first, (X,), {}, chip=chip, hbm=hbm).device
    x = src.allocate_hbm((128, 64), kept["t"].dtype, "x")
    from trnsim.nki.tensor import NkiTensor

    run_kernel(second, (NkiTensor(x.buffer, x.layout),), {}, chip=chip, hbm=hbm)
    np.testing.assert_array_equal(x.read(), X)


# ---------------------------------------------------------------- zero-partition accesses


def zero_dma(a):
    t = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t[5:5], src=a[5:5])  # BUG


def zero_compute(a):
    t = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=0.0)
    nisa.tensor_copy(dst=t[64:64], src=t[0:0])  # BUG


@pytest.mark.parametrize("kernel", [zero_dma, zero_compute], ids=["dma", "tensor_copy"])
def test_zero_partition_access_is_refused(kernel):
    with pytest.raises(ConstraintError, match=r"covers 0 partitions .*1 to 128 partitions "
                                              r"\(nki-api.md §3.4 TC1, §3.5\)") as exc:
        nki.simulate(kernel)(X)
    located(exc, kernel)


def test_beta1_zero_partition_load_says_what_is_allowed():
    def kernel(a):
        t = b1l.load(a[5:5])  # BUG
        return t

    with pytest.raises(ConstraintError, match="partition dimension 0; an on-chip tensor has "
                                              "1 to 128 partitions") as exc:
        b1.jit(kernel)(X)
    located(exc, kernel)


# ---------------------------------------------------------------- Beta-1 core counts


def copy_b1(a):
    out = b1l.ndarray(a.shape, dtype=a.dtype, buffer=b1l.shared_hbm)
    b1l.store(out, b1l.load(a))
    return out


def copy_b1_halves(a):
    """Each of two programs copies its own half (no cross-core race)."""
    out = b1l.ndarray(a.shape, dtype=a.dtype, buffer=b1l.shared_hbm)
    i = b1l.program_id(0)
    b1l.store(out[i * 64:(i + 1) * 64], b1l.load(a[i * 64:(i + 1) * 64]))
    return out


@pytest.mark.parametrize(("chip", "n"), [("trn2", 3), ("trn2", 4), ("trn1", 2)])
def test_beta1_nc_beyond_the_chip_is_refused(chip, n):
    with pytest.raises(ConstraintError, match=rf"kernel\[nl.nc\({n}\)\]: {chip} has at most "
                                              r"\d physical NeuronCore") as exc:
        b1.jit(copy_b1, platform_target=chip)[b1l.nc(n)](X)  # BUG
    assert exc.value.loc.lineno == line_of(test_beta1_nc_beyond_the_chip_is_refused, "# BUG")


@pytest.mark.parametrize("chip", ["trn2", "trn3"])
def test_beta1_nc2_runs_where_lnc2_exists(chip):
    out = b1.jit(copy_b1_halves, platform_target=chip)[b1l.nc(2)](X)
    np.testing.assert_array_equal(out, X)


# ---------------------------------------------------------------- Beta-1 PSUM tile width


@pytest.mark.parametrize(("shape", "dtype"), [((128, 1024), "float32"), ((128, 513), "float32"),
                                              ((128, 2048), "bfloat16")])
def test_beta1_psum_tile_wider_than_a_bank_is_refused(shape, dtype):
    def kernel(a):
        p = b1l.zeros(shape, dtype=getattr(b1l, dtype), buffer=b1l.psum)  # BUG
        return p

    with pytest.raises(ConstraintError, match=r"bytes per partition; a PSUM tile fits one "
                                              r"2048-byte bank .*nki-api.md §3.4 TC2") as exc:
        b1.jit(kernel, platform_target="trn2")(X)
    located(exc, kernel)


def test_beta1_psum_tile_of_one_bank_and_nc_v4_multibank():
    def kernel(a, width):
        p = b1l.zeros((128, width), dtype=b1l.float32, buffer=b1l.psum)
        out = b1l.ndarray((128, width), dtype=b1l.float32, buffer=b1l.shared_hbm)
        b1l.store(out, p)
        return out

    assert (b1.jit(kernel, platform_target="trn2")(X, 512) == 0).all()
    assert (b1.jit(kernel, platform_target="trn3")(X, 2048) == 0).all()  # NC-v4: 8 banks


# ---------------------------------------------------------------- what-if clocks


def test_clock_not_a_whole_mhz_is_exact_now():
    """2.401 GHz was timed at 100 GHz / 42 ticks (0.8 % slow): the tick clock is now the exact
    least common multiple of the clocks."""
    chip = trnsim.load_chip("trn2", engines__tensor__clock_ghz=2.401)
    sched = Scheduler(chip)
    assert sched.period["tensor"] / sched.ticks_per_ns == pytest.approx(1 / 2.401, rel=1e-12)
    for e, spec in chip.engines.items():
        assert sched.period[e] / sched.ticks_per_ns == pytest.approx(1 / spec.clock_ghz,
                                                                     rel=1e-12)


def test_faster_clock_times_faster():
    def kernel(a):
        t = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
        for _ in nl.sequential_range(8):
            nisa.memset(dst=t, value=1.0, engine=nisa.vector_engine)
        return None

    z = np.broadcast_to(np.float32(0), (128, 64))
    lat = {c: trnsim.profile(kernel, z, values=False,
                             chip=trnsim.load_chip("trn2", engines__vector__clock_ghz=c)
                             ).latency_ns for c in (0.96, 0.961)}
    assert lat[0.961] < lat[0.96]


@pytest.mark.parametrize(("value", "words"), [
    (float("inf"), "expected a finite number, got inf"),
    (float("nan"), "expected a finite number, got nan"),
    (2.4005, "2.4005 GHz is not a whole number of MHz"),
    (0.0, "must be positive"),
    (-1.0, "must be positive"),
])
def test_bad_clock_is_refused(value, words):
    with pytest.raises(SpecError, match=words):
        trnsim.load_chip("trn2", engines__tensor__clock_ghz=value)


def test_clocks_without_a_usable_common_tick_are_refused():
    with pytest.raises(SpecError, match=r"least common multiple of \d+ MHz.*at most "
                                        r"1000000000 MHz"):
        trnsim.load_chip("trn2", engines__tensor__clock_ghz=2.399,
                         engines__vector__clock_ghz=0.997, engines__scalar__clock_ghz=1.201,
                         engines__gpsimd__clock_ghz=1.193)


@pytest.mark.parametrize("key", ["hbm.bandwidth_gbps", "cores_per_chip", "hbm.capacity_bytes"])
def test_infinite_number_in_a_what_if_file_is_refused(tmp_path, key):
    section, _, leaf = key.rpartition(".")
    body = f"{leaf}: {{value: .inf, source: me, kind: what-if}}"
    if section:
        body = f"{section}:\n  " + body
    f = tmp_path / "fast.yaml"
    f.write_text(textwrap.dedent("""\
        base: trn2
        name: fast
        description: a what-if
        """) + body + "\n")
    with pytest.raises(SpecError, match=rf"fast.yaml: {key}: expected a finite number, got inf"):
        trnsim.load_chip(str(f))
