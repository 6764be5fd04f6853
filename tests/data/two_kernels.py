"""A script that launches two kernels (used by the CLI tests of trnsim profile/view/diff)."""

import sys

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

SCALE = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0


def scale_kernel(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=SCALE)
    nisa.dma_copy(dst=out, src=t)
    return out


def matmul_kernel(lhs_t, rhs):
    k, m = lhs_t.shape
    n = rhs.shape[1]
    out = nl.ndarray((m, n), nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((m, n), nl.float32, buffer=nl.psum)
    for i in nl.affine_range(k // 128):
        a = nl.ndarray((128, m), lhs_t.dtype, buffer=nl.sbuf)
        b = nl.ndarray((128, n), rhs.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=lhs_t[i * 128:(i + 1) * 128, :])
        nisa.dma_copy(dst=b, src=rhs[i * 128:(i + 1) * 128, :])
        nisa.nc_matmul(acc, a, b)
    res = nl.ndarray((m, n), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(res, acc)
    nisa.dma_copy(dst=out, src=res)
    return out


x = np.arange(128 * 256, dtype=np.float32).reshape(128, 256)
np.testing.assert_allclose(nki.simulate(scale_kernel)(x), x * SCALE)
lt = np.ones((256, 128), np.float32)
r = np.ones((256, 512), np.float32)
np.testing.assert_allclose(nki.simulate(matmul_kernel)(lt, r), lt.T @ r)
