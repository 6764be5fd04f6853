"""neuronxcc.nki.isa (nisa, NKI Beta 1): value-returning instructions with dtype= and mask=,
the engine / reduce_cmd / dge_mode / oob_mode / nc_version enums, and get_nc_version().

Each call issues the same instruction, with the same GA keyword operands, as the current
API's destination-passing form: one semantics function per instruction (trnsim.semantics).
"""

from __future__ import annotations

from trnsim.compat.neuronxcc.nki._isa_core import (
    activation,
    activation_reduce,
    dge_mode,
    dma_engine,
    dropout,
    engine,
    fp32,
    get_nc_version,
    gpsimd_engine,
    iota,
    memset,
    nc_matmul,
    nc_transpose,
    nc_version,
    oob_mode,
    reciprocal,
    reduce_cmd,
    scalar_engine,
    scalar_tensor_tensor,
    tensor_copy,
    tensor_copy_dynamic_dst,
    tensor_copy_dynamic_src,
    tensor_copy_predicated,
    tensor_engine,
    tensor_reduce,
    tensor_scalar,
    tensor_scalar_reduce,
    tensor_tensor,
    tensor_tensor_scan,
    unknown_engine,
    vector_engine,
)
from trnsim.compat.neuronxcc.nki._isa_more import (
    affine_select,
    bn_aggr,
    bn_stats,
    builtin_custom_op,
    dma_copy,
    dma_transpose,
    local_gather,
    max8,
    nc_find_index8,
    nc_match_replace8,
    nc_stream_shuffle,
    range_select,
    select_reduce,
    sequence_bounds,
    tensor_partition_reduce,
)

__all__ = [
    "activation", "activation_reduce", "affine_select", "bn_aggr", "bn_stats",
    "builtin_custom_op", "dge_mode", "dma_copy", "dma_engine", "dma_transpose", "dropout",
    "engine", "fp32", "get_nc_version", "gpsimd_engine", "iota", "local_gather", "max8",
    "memset", "nc_find_index8", "nc_match_replace8", "nc_matmul", "nc_stream_shuffle",
    "nc_transpose", "nc_version", "oob_mode", "range_select", "reciprocal", "reduce_cmd",
    "scalar_engine", "scalar_tensor_tensor", "select_reduce", "sequence_bounds", "tensor_copy",
    "tensor_copy_dynamic_dst", "tensor_copy_dynamic_src", "tensor_copy_predicated",
    "tensor_engine", "tensor_partition_reduce", "tensor_reduce", "tensor_scalar",
    "tensor_scalar_reduce", "tensor_tensor", "tensor_tensor_scan", "unknown_engine",
    "vector_engine",
]
