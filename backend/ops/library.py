"""The kernel library's MoE and quantization kernels as torch ops on device tensors:
`torch.ops.trnsim.moe_ffn`, `quantize_fp8`, `dequantize_fp8`, `matmul_fp8`, `matmul_mx`.

Shapes are the kernels' own (trnsim/kernels/moe.py, quantization.py: multiples of 128 or 512
where they say). torch has no dtype for NKI's IEEE-style float8_e4m3 (max 240, what
quantize_fp8 produces): such tensors travel as their uint8 bits, and the ops that take them
read uint8 bits as float8_e4m3.
"""

from __future__ import annotations

from typing import Any

import torch
from trnsim.backend import launch as launching
from trnsim.backend import storage
from trnsim.backend.runtime import runtime
from trnsim.kernels import moe, quantization

from trnsim import dtypes as dt


def _run(kernel: Any, op: str, *args: Any, fp8: tuple[int, ...] = (), **attrs: Any) -> Any:
    """Launch a library kernel that returns its outputs; returns them as device tensors."""
    from trnsim.backend.user_kernels import TorchAdapter

    from trnsim.errors import TrnsimError
    from trnsim.nki.runner import run_kernel

    rt = runtime()
    views = [storage.hbm_view(rt, a, f"arg{i}", dt.float8_e4m3 if i in fp8 else None)
             for i, a in enumerate(args)]
    fn = getattr(kernel, "fn", kernel)
    try:
        run = run_kernel(fn, views, attrs, chip=rt.chip, hbm=rt.hbm, host_outputs=False,
                         onchip_pool=rt.onchip_pool)
    except TrnsimError as e:
        raise launching.op_error(rt, op, fn.__name__, launching.describe(args, {}), e) from None
    outs = TorchAdapter(rt)._to_torch(run.outputs, list(args))
    launching.record(rt, run, op, fn.__name__, launching.describe(args, {}))
    return outs


def _define() -> None:
    lib_name = "trnsim"
    dev = runtime().name

    @torch.library.custom_op(f"{lib_name}::moe_ffn", mutates_args=(), device_types=dev)
    def moe_ffn(x: torch.Tensor, w_router: torch.Tensor, w_gate: torch.Tensor,
                w_up: torch.Tensor, w_down: torch.Tensor) -> torch.Tensor:
        """Top-2 MoE FFN of SwiGLU experts (trnsim.kernels.moe.moe_ffn)."""
        return _run(moe.moe_ffn, "trnsim::moe_ffn", x, w_router, w_gate, w_up, w_down)

    moe_ffn.register_fake(lambda x, w_router, w_gate, w_up, w_down: torch.empty_like(x))

    @torch.library.custom_op(f"{lib_name}::quantize_fp8", mutates_args=(), device_types=dev)
    def quantize_fp8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-row FP8 quantization: (xq bits as uint8, scale [N, 1] float32)."""
        return tuple(_run(quantization.quantize_fp8, "trnsim::quantize_fp8", x))

    quantize_fp8.register_fake(lambda x: (torch.empty(x.shape, dtype=torch.uint8,
                                                      device=x.device),
                                          torch.empty((x.shape[0], 1), dtype=torch.float32,
                                                      device=x.device)))

    @torch.library.custom_op(f"{lib_name}::dequantize_fp8", mutates_args=(), device_types=dev)
    def dequantize_fp8(xq: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        """x = xq * scale per row, bfloat16 (xq: the uint8 bits of float8_e4m3)."""
        return _run(quantization.dequantize_fp8, "trnsim::dequantize_fp8", xq, scale, fp8=(0,))

    dequantize_fp8.register_fake(lambda xq, scale: torch.empty(xq.shape, dtype=torch.bfloat16,
                                                               device=xq.device))

    @torch.library.custom_op(f"{lib_name}::matmul_fp8", mutates_args=(), device_types=dev)
    def matmul_fp8(lhsT_q: torch.Tensor, rhs_q: torch.Tensor, lhs_scale: torch.Tensor,
                   rhs_scale: torch.Tensor) -> torch.Tensor:
        """(lhsT_q.T @ rhs_q) * lhs_scale * rhs_scale^T in bfloat16 (fp8 operands as bits)."""
        return _run(quantization.matmul_fp8, "trnsim::matmul_fp8", lhsT_q, rhs_q, lhs_scale,
                    rhs_scale, fp8=(0, 1))

    matmul_fp8.register_fake(lambda a, b, sa, sb: torch.empty(
        (a.shape[1], b.shape[1]), dtype=torch.bfloat16, device=a.device))

    @torch.library.custom_op(f"{lib_name}::matmul_mx", mutates_args=(), device_types=dev)
    def matmul_mx(lhsT: torch.Tensor, rhs: torch.Tensor) -> torch.Tensor:
        """MXFP8 matmul lhsT.T @ rhs (operands quantized on chip; trn3)."""
        return _run(quantization.matmul_mx, "trnsim::matmul_mx", lhsT, rhs)

    matmul_mx.register_fake(lambda a, b: torch.empty((a.shape[1], b.shape[1]),
                                                     dtype=torch.bfloat16, device=a.device))


_define()
