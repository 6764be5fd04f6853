"""Optimizer steps: the fused Adam/AdamW/SGD kernels torch.optim calls with fused=True."""

from __future__ import annotations

from trnsim.backend.registry import cpu_overloads, reference_only

reference_only(*cpu_overloads("_fused_adam", "_fused_adamw", "_fused_sgd", "_fused_adagrad"),
               group="optim")
