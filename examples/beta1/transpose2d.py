"""Beta-1 transpose of flattened 2-D matrices inside each partition, by access patterns alone.

Each row of the input holds an f1 x f2 matrix flattened row-major; the kernel rewrites it as
the f2 x f1 transpose with one SBUF-to-SBUF copy whose source and destination walk the row in
different orders (3-D index expressions over a 2-D tile). Run with `trnsim run`.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np


@nki.jit
def transpose_rows(x, f1, f2):
    """Per-partition f1 x f2 -> f2 x f1 transpose.

    Dimensions:
        x: [P, f1 * f2], P <= 128
    Returns:
        out: [P, f2 * f1]
    """
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    parts = x.shape[0]
    tile = nl.load(x)
    i_p = nl.arange(parts)[:, None, None]
    i_1 = nl.arange(f1)[None, :, None]
    i_2 = nl.arange(f2)[None, None, :]
    moved = nl.ndarray((parts, f2 * f1), dtype=x.dtype)
    moved[i_p, i_2 * f1 + i_1] = nl.copy(tile[i_p, i_1 * f2 + i_2])
    nl.store(out, value=moved)
    return out


@nki.jit
def transpose_tile(x):
    """A [P, F] -> [F, P] transpose on the Tensor Engine (result in PSUM, then copied).

    Dimensions:
        x: [P, F], P, F <= 128
    """
    out = nl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.transpose(nl.load(x))
    nl.store(out, value=nl.copy(t))
    return out


if __name__ == "__main__":
    parts, f1, f2 = 5, 3, 4
    a = np.arange(parts * f1 * f2, dtype=np.int8).reshape(parts, f1 * f2)
    want = a.reshape(parts, f1, f2).transpose(0, 2, 1).reshape(parts, f1 * f2)
    np.testing.assert_array_equal(transpose_rows(a, f1, f2), want)
    b = np.random.default_rng(0).standard_normal((128, 96)).astype(np.float32)
    np.testing.assert_array_equal(transpose_tile(b), b.T)
    print("transpose2d: ok")
