"""Rules checked against their documented scope (issue 12, class 2): what the documentation
allows runs, and the documented refusals still raise."""

from __future__ import annotations

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np
import pytest

from trnsim.errors import ConstraintError

RNG = np.random.default_rng(12)
A = RNG.standard_normal((32, 16)).astype(np.float32)
B = RNG.standard_normal((32, 16)).astype(np.float32)
MASK = A > 0.25


def test_bool_predicates_are_uint8_predicates():
    """bool is "stored as uint8" (NKI supported data types), so both predicated copies take
    one: tensor_copy_predicated keeps dst where false, select_reduce picks and reduces."""

    @nki.jit(mode="simulation")
    def kernel(pred, x, y):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        sel = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        top = nl.ndarray((x.shape[0], 1), dtype=x.dtype, buffer=nl.shared_hbm)
        p, tx, ty = nl.load(pred), nl.load(x), nl.load(y)
        nisa.tensor_copy_predicated(src=tx, dst=ty, predicate=p)
        nl.store(out, ty)
        d = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        r = nl.ndarray((x.shape[0], 1), dtype=x.dtype, buffer=nl.sbuf)
        nisa.select_reduce(
            dst=d,
            predicate=p,
            on_true=tx,
            on_false=-5.0,
            reduce_cmd=nisa.reduce_cmd.reset_reduce,
            reduce_res=r,
            reduce_op=nl.max,
        )
        nl.store(sel, d)
        nl.store(top, r)
        return out, sel, top

    out, sel, top = kernel(MASK, A, B)
    np.testing.assert_array_equal(out, np.where(MASK, A, B))
    picked = np.where(MASK, A, -5.0).astype(np.float32)
    np.testing.assert_array_equal(sel, picked)
    np.testing.assert_array_equal(top[:, 0], picked.max(axis=1))


def test_float_predicates_are_still_refused():
    @nki.jit(mode="simulation")
    def kernel(x, y):
        tx, ty = nl.load(x), nl.load(y)
        nisa.tensor_copy_predicated(src=tx, dst=ty, predicate=tx)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, ty)
        return out

    with pytest.raises(ConstraintError, match="'predicate' has dtype float32; allowed: uint8"):
        kernel(A, B)
