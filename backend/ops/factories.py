"""Tensor factories and fills: arange, linspace, eye, fill_, zero_, random fills.

Random fills draw from torch's CPU generator on the host (so torch.manual_seed makes device
runs reproducible and equal to CPU runs); they have no device time.
"""

from __future__ import annotations

from trnsim.backend.registry import cpu_overloads, reference_only

reference_only(*cpu_overloads("fill", "zero", "arange", "linspace", "logspace", "eye"),
               group="factories")
reference_only(*cpu_overloads("uniform", "normal", "bernoulli", "random", "exponential",
                              "geometric", "cauchy", "log_normal", "multinomial", "randperm"),
               note="drawn from torch's CPU generator (torch.manual_seed applies)",
               group="random")
