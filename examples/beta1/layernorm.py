"""Beta-1 LayerNorm, two ways: v1 with nl.mean only, v2 with nisa.bn_stats / bn_aggr for the
statistics and one two-op nisa.tensor_scalar for shift-and-scale. Run with `trnsim run`.
"""

import math

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

P_MAX = 128  # partitions per tile (pmax)


def _params(gamma, beta, dim):
    i_1 = nl.arange(1)[:, None]
    i_f = nl.arange(dim)[None, :]
    g = nl.load(gamma.reshape((1, dim))[i_1, i_f]).broadcast_to((P_MAX, dim))
    b = nl.load(beta.reshape((1, dim))[i_1, i_f]).broadcast_to((P_MAX, dim))
    return g, b


@nki.jit
def layernorm_v1(x, eps, gamma, beta):
    """(x - mean) / sqrt(var + eps) * gamma + beta per row; var = mean(x^2) - mean^2.

    Dimensions:
        x: [N, D]; gamma, beta: [D]
    """
    n_rows, dim = x.shape
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    g, b = _params(gamma, beta, dim)
    i_p = nl.arange(P_MAX)[:, None]
    i_f = nl.arange(dim)[None, :]
    for t in nl.affine_range(math.ceil(n_rows / P_MAX)):
        valid = t * P_MAX + i_p < n_rows
        tile = nl.load(x[t * P_MAX + i_p, i_f], mask=valid)
        mean = nl.mean(tile, axis=1)
        var = nl.mean(nl.square(tile), axis=1) - mean * mean
        normed = (tile - mean) * nl.rsqrt(var + eps)
        nl.store(out[t * P_MAX + i_p, i_f], value=normed * g + b, mask=valid)
    return out


@nki.jit
def layernorm_v2(x, eps, gamma, beta):
    """As v1, with bn_stats over 512-element chunks (the last one masked) and bn_aggr."""
    n_rows, dim = x.shape
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    g, b = _params(gamma, beta, dim)
    i_p = nl.arange(P_MAX)[:, None]
    i_f = nl.arange(dim)[None, :]
    chunk = nl.tile_size.bn_stats_fmax
    n_chunks = math.ceil(dim / chunk)
    i_c = nl.arange(chunk)[None, :]
    i_s = nl.arange(6)[None, :]
    for t in nl.affine_range(math.ceil(n_rows / P_MAX)):
        valid = t * P_MAX + i_p < n_rows
        tile = nl.load(x[t * P_MAX + i_p, i_f], mask=valid)
        stats = nl.ndarray((P_MAX, 6 * n_chunks), dtype=np.float32)
        for c in nl.affine_range(n_chunks):
            stats[i_p, c * 6 + i_s] = nisa.bn_stats(
                tile[i_p, c * chunk + i_c], mask=(c * chunk + i_c < dim), dtype=np.float32
            )
        mean_var = nisa.bn_aggr(stats[i_p, nl.arange(6 * n_chunks)[None, :]])
        inv_std = nl.rsqrt(mean_var[i_p, 1] + eps)
        normed = nisa.tensor_scalar(
            data=tile, op0=np.subtract, operand0=mean_var[i_p, 0], op1=np.multiply, operand1=inv_std
        )
        nl.store(out[t * P_MAX + i_p, i_f], value=normed * g + b, mask=valid)
    return out


def reference(x, eps, gamma, beta):
    mean = x.mean(axis=1, keepdims=True)
    var = x.var(axis=1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    x = rng.random((200, 1000)).astype(np.float32)
    gamma = rng.random(1000).astype(np.float32)
    beta = rng.random(1000).astype(np.float32)
    want = reference(x, 1e-5, gamma, beta)
    np.testing.assert_allclose(layernorm_v1(x, 1e-5, gamma, beta), want, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(layernorm_v2(x, 1e-5, gamma, beta), want, rtol=1e-3, atol=1e-3)
    print("layernorm: ok")
