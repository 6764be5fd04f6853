"""A double-buffered stream (nl.alloc_stream_buffers) under a per-kernel compile config.

Each 128-row step of x is loaded into one of two SBUF slots, scaled on VectorE and stored; with
two slots the load of step k + 1 can run while step k is computed. The kernel asks NKI to
allocate (Allocation.LINEAR) and to schedule, DMAs first (SchedulingHeuristic.DMA_PREFETCH).

Run on the simulator:  trnsim run examples/ga/stream_scale.py
"""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
from nki.compiler import Allocation, CompileConfig, SchedulingHeuristic

P_MAX = 128  # rows per step (pmax)

CONFIG = CompileConfig(
    allocation=Allocation.LINEAR,
    scheduling=True,
    experimental_scheduling_heuristic=SchedulingHeuristic.DMA_PREFETCH,
)


@nki.jit(compile_config=CONFIG)
def stream_scale_kernel(x, scale):
    """out = x * scale, streamed through two SBUF slots.

    Dimensions:
        M: rows, a multiple of P_MAX (the stream's steps are M / P_MAX row blocks).
        N: columns.

    Args:
        x: [M, N] HBM fp32 tensor.
        scale: a Python float.

    Returns:
        out: [M, N] shared-HBM tensor.

    Pseudocode:
        for k in steps:  load x[k] into slot k % 2; slot = slot * scale on VectorE; store
    """
    m, n = x.shape
    out = nl.ndarray((m, n), dtype=x.dtype, buffer=nl.shared_hbm)
    steps = x.reshape((m // P_MAX, P_MAX, n))  # one stream step per leading index
    outs = out.reshape((m // P_MAX, P_MAX, n))
    slots = nl.alloc_stream_buffers(steps, buffer=nl.sbuf, dim=0, num_slots=2)
    for k in range(m // P_MAX):  # compile-time steps: slot k % 2
        tile = slots[k]
        nisa.dma_copy(dst=tile, src=steps[k])
        nisa.tensor_scalar(dst=tile, data=tile, op0=nl.multiply, operand0=scale)
        nisa.dma_copy(dst=outs[k], src=tile)
    return out


def main():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1024, 512)).astype(np.float32)
    out = nki.simulate(stream_scale_kernel)(x, 0.5)
    np.testing.assert_array_equal(out, x * np.float32(0.5))
    print("stream_scale: OK")


if __name__ == "__main__":
    main()
