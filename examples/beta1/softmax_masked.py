"""Beta-1 row softmax over a ragged number of rows: masks shrink every instruction of the last
tile to the rows that exist. Run with `trnsim run`.
"""

import math

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

P_MAX = 128  # partitions per tile (pmax)


@nki.jit
def softmax_kernel(x):
    """softmax(x) along the free axis, 128 rows at a time; the last tile is masked.

    Dimensions:
        x: [N, F], any N
    Returns:
        out: [N, F]
    """
    n_rows, n_cols = x.shape
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(P_MAX)[:, None]
    i_f = nl.arange(n_cols)[None, :]
    for t in nl.affine_range(math.ceil(n_rows / P_MAX)):
        rows = t * P_MAX + i_p
        valid = rows < n_rows
        tile = nl.load(x[rows, i_f], mask=valid)
        neg_max = nl.multiply(nl.max(tile, axis=1, mask=valid), -1.0, mask=valid)
        e = nl.exp(nl.add(tile, neg_max, mask=valid), mask=valid)
        total = nl.sum(e, axis=1, mask=valid)
        probs = nl.multiply(e, nl.reciprocal(total, mask=valid), mask=valid)
        nl.store(out[rows, i_f], value=probs, mask=valid)
    return out


@nki.jit
def softmax_builtin(x):
    """The same with nl.softmax (max, exp with bias, sum, reciprocal, multiply)."""
    n_rows, n_cols = x.shape
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(P_MAX)[:, None]
    i_f = nl.arange(n_cols)[None, :]
    for t in nl.affine_range(math.ceil(n_rows / P_MAX)):
        valid = t * P_MAX + i_p < n_rows
        tile = nl.load(x[t * P_MAX + i_p, i_f], mask=valid)
        nl.store(out[t * P_MAX + i_p, i_f], value=nl.softmax(tile, axis=1, mask=valid), mask=valid)
    return out


def reference(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


if __name__ == "__main__":
    x = np.random.default_rng(0).standard_normal((300, 256)).astype(np.float32)
    np.testing.assert_allclose(softmax_kernel(x), reference(x), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(softmax_builtin(x), reference(x), rtol=1e-5, atol=1e-6)
    print("softmax_masked: ok")
