"""Fake quantization for quantization-aware training (torch.ao.quantization's FakeQuantize and
FusedMovingAvgObsFakeQuantize, torch.fake_quantize_per_*_affine) on the host (reference only:
PyTorch's CPU kernels over the device's bytes; the observers' running min/max and scales are
updated in place on the device). Real quantized tensors (torch.qint8 storage) are not device
tensors; the library's own fp8/MX quantization kernels are `torch.ops.trnsim.*`."""

from __future__ import annotations

from trnsim.backend.registry import cpu_overloads, reference_rest

reference_rest(*cpu_overloads(
    "fake_quantize_per_tensor_affine_cachemask",
    "_fake_quantize_per_tensor_affine_cachemask_tensor_qparams",
    "fake_quantize_per_channel_affine_cachemask", "_fake_quantize_learnable_per_tensor_affine",
    "_fake_quantize_learnable_per_tensor_affine_backward",
    "_fake_quantize_learnable_per_channel_affine",
    "_fake_quantize_learnable_per_channel_affine_backward", "_fused_moving_avg_obs_fq_helper",
), group="quantization")
