"""LNC2 element-wise add: the two NeuronCores of a logical core each add half of the rows.

Run with `trnsim run examples/ga/lnc2_add.py` (or any setup where `import nki` is NKI).

Dimensions:
    a, b, out: (R, F) with R a multiple of 2 * 128 rows, F free elements per row.

Notes:
    `kernel[2]` launches two programs; nl.program_id(0) is 0 on core 0 and 1 on core 1,
    nl.num_programs() is 2. Inputs and the output live in shared HBM, visible to both cores;
    each core loads, adds and stores only its own half, so no synchronisation is needed.
"""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

P_MAX = 128  # partitions per tile (pmax)


@nki.jit
def lnc2_add(a, b):
    """out = a + b, rows split across the two cores of an LNC2 launch."""
    rows, cols = a.shape
    out = nl.ndarray((rows, cols), dtype=a.dtype, buffer=nl.shared_hbm)
    half = rows // nl.num_programs()
    base = nl.program_id(0) * half
    for t in range(half // P_MAX):
        r0 = base + t * P_MAX
        a_t = nl.ndarray((P_MAX, cols), dtype=a.dtype, buffer=nl.sbuf)
        b_t = nl.ndarray((P_MAX, cols), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a_t, src=a[r0 : r0 + P_MAX, :])
        nisa.dma_copy(dst=b_t, src=b[r0 : r0 + P_MAX, :])
        s_t = nl.ndarray((P_MAX, cols), dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=s_t, data1=a_t, data2=b_t, op=nl.add)
        nisa.dma_copy(dst=out[r0 : r0 + P_MAX, :], src=s_t)
    return out


def main() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((512, 256)).astype(np.float32)
    b = rng.standard_normal((512, 256)).astype(np.float32)
    out = nki.simulate(lnc2_add[2])(a, b)
    np.testing.assert_allclose(out, a + b, rtol=1e-6, atol=1e-6)
    print(
        f"lnc2_add: {a.shape} on 2 cores matches numpy (max |err| "
        f"{float(np.abs(out - (a + b)).max()):.3g})"
    )


if __name__ == "__main__":
    main()
