"""Beta-1 API that AWS's newer per-API examples use (issue 12, the 85-method set): the
destination-passing tensor_scalar_cumulative, an optional HBM argument tested with `if`,
nl.store of a Python scalar, and the neuronxcc.nki.isa.constants module."""

from __future__ import annotations

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np
import pytest

from trnsim.errors import ConstraintError

RNG = np.random.default_rng(1212)
X = RNG.uniform(-2.0, 2.0, (64, 40)).astype(np.float32)
COL = RNG.uniform(-1.0, 1.0, (64, 1)).astype(np.float32)
INIT = RNG.uniform(-1.0, 1.0, (64, 1)).astype(np.float32)


@nki.jit(mode="simulation")
def cumulative(src, op0, op1, imm0, imm1=None, cmd=nisa.reduce_cmd.reset_reduce, twice=False):
    out = nl.ndarray(src.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    s = nl.load(src)
    i0 = nl.load(imm0)
    i1 = nl.load(imm1) if imm1 else None  # an optional HBM argument: truthy when given
    d = nl.ndarray(src.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar_cumulative(dst=d, src=s, op0=op0, op1=op1, imm0=i0, imm1=i1, reduce_cmd=cmd)
    if twice:  # continue from the Vector accumulator the first scan left
        nisa.tensor_scalar_cumulative(
            dst=d, src=s, op0=op0, op1=op1, imm0=i0, reduce_cmd=nisa.reduce_cmd.reduce
        )
    nl.store(out, d)
    return out


def _scan(v: np.ndarray, op, start: np.ndarray) -> np.ndarray:
    """Running op over the columns of v from `start`, in float64."""
    return op.accumulate(np.concatenate([start, v], axis=1), axis=1)[:, 1:]


@pytest.mark.parametrize(
    ("op1", "np_op", "identity"),
    [(nl.add, np.add, 0.0), (nl.multiply, np.multiply, 1.0), (nl.maximum, np.maximum, -np.inf)],
    ids=["add", "multiply", "max"],
)
def test_cumulative_resets_to_the_identity_of_op1(op1, np_op, identity):
    """reset_reduce starts each partition's register from op1's identity (documented
    pseudocode of nki.isa.tensor_scalar_cumulative); op0 applies the per-partition imm0."""
    got = cumulative(X, nl.multiply, op1, COL)
    v = X.astype(np.float64) * COL
    want = _scan(v, np_op, np.full((64, 1), identity))
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)


def test_cumulative_load_reduce_starts_from_imm1_and_reduce_continues():
    got = cumulative(X, nl.add, nl.add, COL, INIT, nisa.reduce_cmd.load_reduce, twice=True)
    v = X.astype(np.float64) + COL
    first = _scan(v, np.add, INIT.astype(np.float64))
    want = _scan(v, np.add, first[:, -1:])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_missing_optional_argument_is_falsy_a_given_one_truthy():
    """Without imm1 the `if imm1` branch is skipped, and reset_reduce does not need it."""
    got = cumulative(X, nl.add, nl.add, COL)
    np.testing.assert_allclose(
        got, np.cumsum(X.astype(np.float64) + COL, axis=1), rtol=1e-5, atol=1e-5
    )


def test_while_on_an_hbm_tensor_and_if_on_a_tile_are_still_refused():
    @nki.jit(mode="simulation")
    def while_hbm(a):
        while a:  # would never end
            pass
        return a

    @nki.jit(mode="simulation")
    def if_tile(a):
        t = nl.load(a)
        if t:  # a value the kernel cannot know when it is traced
            pass
        return a

    with pytest.raises(ConstraintError, match="do-while"):
        while_hbm(X)
    with pytest.raises(ConstraintError, match="dynamic control-flow"):
        if_tile(X)


@pytest.mark.parametrize(("dtype", "value"), [(np.int32, 100), (np.float32, -2.5)])
def test_store_of_a_scalar_fills_the_hbm_region(dtype, value):
    """nl.store(dst, scalar) writes the scalar everywhere in dst (AWS's nl.store example:
    "effectively a memset"), here into one half of the output only."""

    @nki.jit(mode="simulation")
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a))
        nl.store(out[32:64, 8:24], value)
        return out

    a = np.arange(64 * 40).reshape(64, 40).astype(dtype)
    want = a.copy()
    want[32:64, 8:24] = value
    np.testing.assert_array_equal(kernel(a), want)


def test_isa_constants_module_holds_the_isa_enums():
    from neuronxcc.nki.isa.constants import dge_mode, engine, oob_mode, reduce_cmd

    assert dge_mode is nisa.dge_mode
    assert engine is nisa.engine
    assert oob_mode is nisa.oob_mode
    assert reduce_cmd is nisa.reduce_cmd
    assert nisa.constants.engine is nisa.engine
