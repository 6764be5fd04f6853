"""Tensor creation: ndarray placement rules, zeros/ones/full, *_like, constants, rand."""

from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from nl_testing import run_tile
from source_paths import assert_no_internal_path

from trnsim.errors import ConstraintError
from trnsim.nki.runner import record_launches, stop_recording


def _store(t):
    if t.buffer == nl.psum or t.buffer == nl.hbm or t.buffer == nl.shared_hbm:
        if not nl.is_on_chip(t.buffer):
            return t
        s = nl.ndarray(t.shape, t.dtype)
        nisa.tensor_copy(dst=s, src=t)
        t = s
    out = nl.ndarray(t.shape, t.dtype, buffer=nl.shared_hbm)
    nl.store(out, t)
    return out


def _program(fn, *args):
    runs = []
    token = record_launches(runs)
    try:
        out = nki.simulate(fn)(*args)
    finally:
        stop_recording(token)
    return out, runs[0].program


def test_zeros_ones_full_values_and_memset():
    def kernel():
        return (
            _store(nl.zeros((128, 8), nl.float32)),
            _store(nl.ones((4, 8), nl.int32)),
            _store(nl.full((32, 3), 7, nl.int16, buffer=nl.psum if False else nl.sbuf)),
            _store(nl.full((8, 8), 1.5, nl.bfloat16)),
        )

    (z, o, f, b), prog = _program(kernel)
    np.testing.assert_array_equal(z, 0)
    np.testing.assert_array_equal(o, 1)
    assert o.dtype == np.int32
    np.testing.assert_array_equal(f, 7)
    np.testing.assert_array_equal(b.astype(np.float32), 1.5)
    memsets = [i for i in prog if i.opcode == "memset"]
    assert len(memsets) == 4
    assert all(i.engine in ("vector", "gpsimd") for i in memsets)


def test_zeros_in_psum_and_hbm():
    def kernel():
        p = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
        h = nl.full((300,), 2.0, nl.float32, buffer=nl.shared_hbm)
        return _store(p), h

    (p, h), prog = _program(kernel)
    np.testing.assert_array_equal(p, 0)
    np.testing.assert_array_equal(h, 2.0)
    # HBM has no memset: a memset SBUF staging tile and DMAs fill it
    assert [i.opcode for i in prog].count("dma_copy") >= 2


def test_like_functions_default_dtype_and_buffer():
    def kernel(a):
        x = nl.load(a)
        e = nl.empty_like(x)
        z = nl.zeros_like(a, dtype=nl.int32)
        assert e.shape == x.shape
        assert e.dtype == x.dtype
        assert e.buffer == nl.sbuf
        assert nl.empty_like(a).buffer == nl.private_hbm or nl.is_hbm(nl.empty_like(a).buffer)
        assert z.dtype == nl.int32
        assert nl.is_sbuf(z.buffer)
        return _store(z)

    out = nki.simulate(kernel)(np.ones((16, 4), np.float32))
    np.testing.assert_array_equal(out, 0)


def test_uninitialised_memory_is_poisoned():
    def kernel():
        return _store(nl.ndarray((4, 4), nl.float32)), _store(nl.ndarray((4, 4), nl.int32))

    f, i = nki.simulate(kernel)()
    assert np.isnan(f).all()
    np.testing.assert_array_equal(i, 4)


def test_shared_constant_and_identity(tmp_path):
    table = np.arange(12, dtype=np.float32).reshape(3, 4)
    path = tmp_path / "c.npy"
    np.save(path, table)

    def kernel():
        c1 = nl.shared_constant(table)
        c2 = nl.shared_constant(str(path))
        ident = nl.shared_identity_matrix(32, dtype=nl.float32)
        again = nl.shared_identity_matrix(32, dtype=nl.float32)
        assert again is ident  # one identity per (n, dtype), as the compiler dedups
        assert c1.buffer == nl.shared_hbm
        return c1, c2, _store(ident)

    (c1, c2, ident), _prog = _program(kernel)
    np.testing.assert_array_equal(c1, table)
    np.testing.assert_array_equal(c2, table)
    np.testing.assert_array_equal(ident, np.eye(32))


def test_shared_constant_rejects_float64():
    def kernel():
        return nl.shared_constant(np.zeros((2, 2)))

    with pytest.raises(ConstraintError, match="float64 is not supported") as exc:
        nki.simulate(kernel)()
    assert exc.value.loc.function == "kernel"
    assert_no_internal_path(str(exc.value))


def test_rand_and_random_seed():
    def kernel():
        seed = nl.full((1, 1), 42, dtype=nl.int32)
        nl.random_seed(seed)
        a = nl.rand((128, 64), dtype=nl.float32)
        nl.random_seed(seed)
        b = nl.rand((128, 64), dtype=nl.float32)
        return _store(a), _store(b)

    for chip in ("trn3", "trn2"):
        a, b = nki.simulate(kernel, chip=chip)()
        assert ((a >= 0) & (a <= 1)).all()
        assert a.std() > 0.1
        if chip == "trn3":
            np.testing.assert_array_equal(a, b)


def test_random_seed_needs_a_tile():
    def kernel():
        nl.random_seed(42)

    with pytest.raises(ConstraintError, match=r"\[1, 1\] int32 tensor") as exc:
        nki.simulate(kernel)()
    assert exc.value.loc.function == "kernel"


# ---------------------------------------------------------------- placement rules
def test_address_places_on_chip_tensors():
    def kernel():
        # the free offset is in bytes (NKI 0.2.0 migration guide: "virtual byte addresses")
        t = nl.ndarray((32, 16), nl.float32, buffer=nl.sbuf, address=(32, 256))
        nisa.memset(dst=t, value=3.0)
        assert t.buffer.partition_start == 32
        assert t.buffer.byte_start == 256
        p = nl.ndarray((128, 512), nl.float32, buffer=nl.psum, address=(0, 4096))
        assert p.buffer.byte_start == 4096
        return _store(t)

    np.testing.assert_array_equal(nki.simulate(kernel)(), 3.0)


@pytest.mark.parametrize(
    ("shape", "buffer", "address", "match"),
    [
        ((64, 8), "sbuf", (32, 0), "must be 0 or 64"),
        ((128, 8), "sbuf", (64, 0), "must be 0"),
        ((16, 8), "sbuf", (48, 0), "must be 0 or 32 or 64 or 96"),
        ((128, 8), "psum", (0, 100), "bank boundary"),
        ((128, 8), "sbuf", (0, 2), "multiple of the 4-byte"),
        ((128, 8), "hbm", (0, 0), "on-chip tensors only"),
    ],
    ids=["half", "full", "quadrant", "psum-bank", "byte-alignment", "hbm"],
)
def test_address_rules(shape, buffer, address, match):
    buf = {"sbuf": nl.sbuf, "psum": nl.psum, "hbm": nl.shared_hbm}[buffer]

    def kernel():
        nl.ndarray(shape, nl.float32, buffer=buf, address=address)

    with pytest.raises(ConstraintError, match=match) as exc:
        nki.simulate(kernel)()
    assert exc.value.loc.function == "kernel"
    assert_no_internal_path(str(exc.value))


def test_too_many_partitions_and_string_buffer():
    def big():
        nl.ndarray((256, 4), nl.float32)

    with pytest.raises(ConstraintError, match="exceeds the 128 partitions") as exc:
        nki.simulate(big)()
    assert exc.value.loc.function == "big"

    def strbuf():
        nl.ndarray((4, 4), nl.float32, buffer="sbuf")

    with pytest.raises(ConstraintError, match="strings are not buffers"):
        nki.simulate(strbuf)()


def test_ga_private_hbm_outputs_warn():
    """Accepted with a warning naming buffer=nl.shared_hbm (the migration guide and AWS's
    tutorials disagree on whether nl.hbm outputs compile; issue 12)."""
    from trnsim.errors import SimulationWarning

    def kernel(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.hbm)
        nisa.dma_copy(dst=out, src=a)
        return out

    with pytest.warns(SimulationWarning, match=r"buffer=nl\.shared_hbm"):
        out = nki.simulate(kernel)(np.ones((4, 4), np.float32))
    assert out.tolist() == np.ones((4, 4)).tolist()


def test_buffer_predicates_and_memory_region():
    assert nl.is_hbm(nl.hbm)
    assert nl.is_hbm(nl.shared_hbm)
    assert not nl.is_hbm(nl.sbuf)
    assert nl.is_on_chip(nl.psum)
    assert nl.is_sbuf(nl.sbuf)
    assert nl.is_psum(nl.psum)
    assert nl.hbm is nl.private_hbm
    assert isinstance(nl.sbuf, nl.MemoryRegion)

    def kernel(a):
        x = nl.load(a)
        assert x.buffer == nl.sbuf
        assert nl.sbuf == x.buffer
        assert x.buffer != nl.psum
        assert nl.is_hbm(a.buffer)
        assert a.buffer == nl.shared_hbm
        return a

    nki.simulate(kernel)(np.ones((4, 4), np.float32))


def test_nl_functions_outside_a_kernel_raise():
    from trnsim.errors import KernelError

    with pytest.raises(KernelError, match="outside of a running NKI kernel"):
        nl.zeros((4, 4), nl.float32)
    assert run_tile is not None
