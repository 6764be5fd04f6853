"""Indexing and data movement: cat, index, gather/scatter, masks, flips, sorts."""

from __future__ import annotations

from trnsim.backend.registry import cpu_overloads, reference_only

reference_only(*cpu_overloads(
    "cat", "index_select", "index", "_index_put_impl", "index_add", "index_copy", "index_fill",
    "gather", "scatter", "scatter_add", "scatter_reduce", "masked_scatter",
    "masked_select", "nonzero", "take", "put", "flip", "roll", "sort", "topk",
    "argsort", "unique_dim", "_unique2", "unique_consecutive", "searchsorted", "bucketize",
    "repeat_interleave", "histc", "bincount", "equal", "isin", "kthvalue", "median", "mode",
    "nanmedian", "_embedding_bag", "_embedding_bag_backward", "diag_embed", "trace",
    "constant_pad_nd", "reflection_pad2d", "replication_pad2d", "complex", "polar",
), group="indexing")
