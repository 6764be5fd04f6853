"""The device's ATen ops, one module per family; importing this package fills the registry."""

from trnsim.backend.ops import (  # noqa: F401
    attention,
    copying,
    factories,
    foreach,
    histogram,
    indexing,
    library,
    linalg,
    linalg_solvers,
    nn,
    norms,
    optim,
    pointwise,
    quantization,
    reductions,
    rnn,
    softmax,
    spectral,
    transformer_fastpath,
)
