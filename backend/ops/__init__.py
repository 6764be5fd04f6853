"""The device's ATen ops, one module per family; importing this package fills the registry."""

from trnsim.backend.ops import (  # noqa: F401
    copying,
    factories,
    indexing,
    linalg,
    nn,
    optim,
    pointwise,
    reductions,
)
