"""A raw integer for an nki.isa enum parameter is the GA member of that value (nki-library
passes `dge_mode=3`, GA's `dge_mode.none`, to nisa.dma_copy); "raw ints rejected" is the
rule for a kernel's own signature (nki-api.md §2.1). Integers no member has stay errors."""

from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from trnsim.errors import ConstraintError

X = np.arange(4 * 8, dtype=np.float32).reshape(4, 8)


def _copy(a, dge, engine):
    """out = a, through one SBUF tile: DMA in with dge_mode=dge, tensor_copy on engine."""
    t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    u = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a, dge_mode=dge)
    nisa.tensor_copy(u, t, engine)
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=u)
    return out


def _engines(dge, engine):
    run = nki.simulate(lambda a: _copy(a, dge, engine))
    np.testing.assert_array_equal(run(X), X)
    from trnsim.nki.runner import record_launches, stop_recording

    sink: list = []
    token = record_launches(sink)
    try:
        run(X)
    finally:
        stop_recording(token)
    return [(i.opcode, i.engine, i.attrs.get("dge_mode")) for i in sink[0].program]


@pytest.mark.parametrize(
    ("dge", "engine"),
    [(3, 5), (np.int64(3), np.int32(3)), (1, 2)],
    ids=["none-vector", "numpy-ints", "swdge-scalar"],
)
def test_raw_integer_is_the_member_of_that_value(dge, engine):
    """The program recorded with raw integers equals the one recorded with the members."""
    members = (nisa.dge_mode(int(dge)), nisa.engine(int(engine)))
    assert _engines(dge, engine) == _engines(*members)


@pytest.mark.parametrize(
    ("dge", "engine", "pattern"),
    [(9, nisa.engine.vector, "dge_mode=9 is not a DGE mode"),
     (nisa.dge_mode.none, 42, "engine=42 is not an engine")],
    ids=["dge", "engine"],
)
def test_integer_of_no_member_is_an_error(dge, engine, pattern):
    with pytest.raises(ConstraintError, match=pattern) as exc:
        nki.simulate(lambda a: _copy(a, dge, engine))(X)
    assert exc.value.loc is not None
    assert exc.value.loc.filename == __file__
