"""Random-number instructions vs an independent scalar XORWOW (nki-api.md §7.3): rng,
set_rng_seed, rand2, rand_set_state, rand_get_state, dropout."""

from __future__ import annotations

import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from vector_helpers import load, run, store, tile

P = 4
M32 = 0xFFFFFFFF


def xorwow(state: list[int], count: int) -> list[int]:
    """Marsaglia's XORWOW on Python ints; state = [x, y, z, w, v, d] is advanced in place."""
    x, y, z, w, v, d = state
    out = []
    for _ in range(count):
        t = (x ^ (x >> 2)) & M32
        x, y, z, w = y, z, w, v
        v = ((v ^ (v << 4)) ^ (t ^ (t << 1))) & M32
        d = (d + 362437) & M32
        out.append((d + v) & M32)
    state[:] = [x, y, z, w, v, d]
    return out


def _states(rng, words):
    return rng.integers(1, 2**32, (P, words), dtype=np.uint64).astype(np.uint32)


def _gpsimd_kernel(n, dtype=nl.uint32):
    def kernel(st):
        nisa.rand_set_state(src_seeds=load(st), engine=nisa.engine.gpsimd)
        z = tile((P, n), dtype)
        nisa.rng(dst=z, engine=nisa.engine.gpsimd)
        back = tile((P, 6), nl.uint32)
        nisa.rand_get_state(dst=back, engine=nisa.engine.gpsimd)
        return store(z), store(back)

    return kernel


def test_gpsimd_rng_is_xorwow_per_lane(rng):
    st = _states(rng, 6)
    bits, back = run(_gpsimd_kernel(10), st, chip="trn2")
    for p in range(P):
        s = [int(v) for v in st[p]]
        assert list(bits[p]) == xorwow(s, 10)
        assert list(back[p]) == s


def test_vector_rng_interleaves_four_generators(rng):
    st = _states(rng, 24)

    def kernel(st):
        nisa.rand_set_state(src_seeds=load(st), engine=nisa.engine.vector)
        z = tile((P, 2, 5), nl.uint32)
        nisa.rng(dst=z)
        return store(z)

    bits = run(kernel, st).reshape(P, 10)
    for p in range(P):
        gens = [[int(v) for v in st[p, 6 * g : 6 * g + 6]] for g in range(4)]
        outs = [xorwow(g, 3) for g in gens]
        assert list(bits[p]) == [outs[j % 4][j // 4] for j in range(10)]


@pytest.mark.parametrize(
    ("dtype", "npdt"), [(nl.int8, np.int8), (nl.uint16, np.uint16), (nl.int32, np.int32)]
)
def test_rng_truncates_to_the_low_bits(rng, dtype, npdt):
    st = _states(rng, 6)
    full, _ = run(_gpsimd_kernel(7), st, chip="trn2")
    low, _ = run(_gpsimd_kernel(7, dtype), st, chip="trn2")
    np.testing.assert_array_equal(low, full.astype(npdt))


def test_rng_is_deterministic_per_seed():
    def kernel():
        z = tile((P, 16), nl.uint32)
        nisa.rng(dst=z)
        return store(z)

    a, b, c = run(kernel, seed=1), run(kernel, seed=1), run(kernel, seed=2)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_set_rng_seed_overrides_the_device_seed():
    def kernel(seed):
        nisa.set_rng_seed(src_seeds=load(seed))
        z = tile((P, 8), nl.uint32)
        nisa.rng(dst=z)
        f = tile((P, 8), nl.float32)
        nisa.rand2(dst=f, min=-1.0, max=1.0)
        return store(z), store(f)

    s = np.array([[1234]], np.int32)
    (a, fa), (b, fb) = run(kernel, s, seed=1), run(kernel, s, seed=99)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(fa, fb)
    (c, _) = run(kernel, np.array([[1235]], np.int32))
    assert not np.array_equal(a, c)
    assert len({tuple(r) for r in a}) == P  # lanes get different streams


def _uniform(bits):
    return np.float32((bits >> 8) * 2.0**-24)


def test_rand2_uniform_in_range(rng):
    st = _states(rng, 24)
    lo = np.array([[-1.0], [0.0], [2.0], [5.0]], np.float32)

    def kernel(st, lo):
        nisa.rand_set_state(src_seeds=load(st), engine=nisa.engine.vector)
        f = tile((P, 12), nl.float32)
        nisa.rand2(dst=f, min=load(lo), max=6.0)
        return store(f)

    out = run(kernel, st, lo)
    for p in range(P):
        gens = [[int(v) for v in st[p, 6 * g : 6 * g + 6]] for g in range(4)]
        outs = [xorwow(g, 3) for g in gens]
        u = np.array([_uniform(outs[j % 4][j // 4]) for j in range(12)], np.float32)
        ref = (lo[p, 0] + (np.float32(6.0) - lo[p, 0]) * u).astype(np.float32)
        np.testing.assert_array_equal(out[p], ref)
        assert (out[p] >= lo[p, 0]).all()
        assert (out[p] <= 6.0).all()


def test_dropout_mask_follows_the_vector_prng_without_rescale(rng):
    st = _states(rng, 24)
    x = rng.standard_normal((P, 12)).astype(np.float32) + 10
    prob = np.array([[0.0], [0.3], [0.7], [1.0]], np.float32)

    def kernel(st, x, prob):
        nisa.rand_set_state(src_seeds=load(st), engine=nisa.engine.vector)
        d = tile(x.shape, nl.float32)
        nisa.dropout(dst=d, data=load(x), prob=load(prob))
        return store(d)

    out = run(kernel, st, x, prob)
    for p in range(P):
        gens = [[int(v) for v in st[p, 6 * g : 6 * g + 6]] for g in range(4)]
        outs = [xorwow(g, 3) for g in gens]
        u = np.array([_uniform(outs[j % 4][j // 4]) for j in range(12)], np.float32)
        np.testing.assert_array_equal(out[p], np.where(u >= prob[p, 0], x[p], 0))
    np.testing.assert_array_equal(out[0], x[0])  # prob 0 keeps everything, unscaled
    assert not out[3].any()  # prob 1 drops everything


def test_dropout_int_data_scalar_prob_statistics():
    x = np.full((128, 512), 7, np.int16)

    def kernel(x):
        d = tile(x.shape, nl.int16)
        nisa.dropout(dst=d, data=load(x), prob=0.25)
        return store(d)

    out = run(kernel, x)
    assert set(np.unique(out)) <= {0, 7}
    assert abs((out == 0).mean() - 0.25) < 0.01
