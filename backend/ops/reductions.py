"""Reductions: sum, mean, prod, max/min (values and indices), norms, var/std, scans."""

from __future__ import annotations

from trnsim.backend.registry import cpu_overloads, reference_only

REDUCTIONS = [
    "sum", "mean", "prod", "amax", "amin", "max", "min", "argmax", "argmin", "aminmax", "all",
    "any", "var", "std", "var_mean", "std_mean", "linalg_vector_norm", "norm", "logsumexp",
    "cumsum", "cumprod", "nansum", "count_nonzero",
]

reference_only(*cpu_overloads(*REDUCTIONS), group="reductions")
