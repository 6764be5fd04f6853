"""Semantics of nki.collectives: what every rank's destinations hold, from every rank's sources.

Pure numpy on host arrays, in rank-list order; knows nothing about time. Reductions accumulate
floats in fp32 (integers in int64) in rank-list order and round once to the destination dtype,
so every rank of a group gets the same bits. The instruction records below carry no data
effect: the rendezvous in trnsim.nki.collectives holds every rank's sources and writes the
results these functions compute (as core_barrier's waiting happens where programs run).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from trnsim import dtypes as dt
from trnsim.semantics import semantics

REDUCE_OPS = {"add": np.add, "minimum": np.minimum, "maximum": np.maximum}


def _acc_dtype(a: np.ndarray) -> np.dtype:
    return np.dtype(np.int64) if a.dtype.kind in "iub" else np.dtype(np.float32)


def reduce(arrays: Sequence[np.ndarray], op: str) -> np.ndarray:
    """Elementwise `op` (add, minimum, maximum) over the arrays, in order, in fp32 / int64."""
    fn = REDUCE_OPS[op]
    acc = np.asarray(arrays[0]).astype(_acc_dtype(arrays[0]))
    for a in arrays[1:]:
        acc = fn(acc, np.asarray(a).astype(acc.dtype))
    return acc


def all_reduce(srcs: Sequence[np.ndarray], op: str) -> np.ndarray:
    return reduce(srcs, op)


def all_gather(srcs: Sequence[np.ndarray], dim: int) -> np.ndarray:
    return np.concatenate([np.asarray(s) for s in srcs], axis=dim)


def reduce_scatter(srcs: Sequence[np.ndarray], op: str, position: int, dim: int = 0) -> np.ndarray:
    """The `position`-th of N equal chunks (along dim) of the reduction."""
    n = len(srcs)
    chunks = [np.array_split(np.asarray(s), n, axis=dim)[position] for s in srcs]
    return reduce(chunks, op)


def all_to_all(srcs: Sequence[np.ndarray], position: int, dim: int = 0) -> np.ndarray:
    """Chunk `position` of every rank's source, concatenated in rank-list order."""
    n = len(srcs)
    return np.concatenate([np.array_split(np.asarray(s), n, axis=dim)[position] for s in srcs],
                          axis=dim)


def all_to_all_v(srcs: Sequence[np.ndarray], metas: Sequence[np.ndarray], position: int,
                 dst: np.ndarray, has_rdispls: bool) -> np.ndarray:
    """Flat variable all-to-all: sender s sends src[sdispl[d] : sdispl[d] + scount[d]] to the
    rank at position d (metadata rows 0 and 1, in elements); the receiver places the piece from
    s at its row-3 displacement for s (has_rdispls), else right after the piece from s-1."""
    out = np.array(dst, copy=True).reshape(-1)
    me = np.asarray(metas[position])
    at = 0
    for s, (src, meta) in enumerate(zip(srcs, metas, strict=True)):
        count, displ = int(meta[0][position]), int(meta[1][position])
        piece = np.asarray(src).reshape(-1)[displ:displ + count]
        start = int(me[3][s]) if has_rdispls else at
        out[start:start + count] = piece
        at = start + count
    return out.reshape(dst.shape)


def all_gather_v(srcs: Sequence[np.ndarray], metas: Sequence[np.ndarray], dst: np.ndarray,
                 has_rdispls: bool, position: int) -> np.ndarray:
    """Flat variable all-gather: sender s broadcasts src[displ : displ + count] (row 1 / row 0,
    first column of its metadata); it lands in slot s of every dst (dst split into one equal
    slot per rank), or at the receiver's row-3 displacement for s (has_rdispls)."""
    out = np.array(dst, copy=True).reshape(-1)
    me = np.asarray(metas[position])
    slot = out.size // len(srcs)
    for s, (src, meta) in enumerate(zip(srcs, metas, strict=True)):
        count, displ = int(meta[0][0]), int(meta[1][0])
        piece = np.asarray(src).reshape(-1)[displ:displ + count]
        start = int(me[3][s]) if has_rdispls else s * slot
        out[start:start + count] = piece
    return out.reshape(dst.shape)


def cast_to(a: np.ndarray, dtype: dt.DType) -> np.ndarray:
    """`a` in the destination's dtype, as the hardware converts (dtypes.cast)."""
    return dt.cast(a, dtype)


# ---------------------------------------------------------------- instruction records
# One record per rank's part of a collective: its reads and writes order it against the
# rank's own instructions; the timing model expands the collective's transfers from it.

OPCODES = ("all_reduce", "all_gather", "all_gather_v", "reduce_scatter", "all_to_all",
            "all_to_all_v", "all_to_all_v_prepare", "all_gather_v_prepare",
            "collective_permute", "collective_permute_implicit",
            "collective_permute_implicit_reduce")


def _no_data_effect(core: Any, *, engine: str, **_: Any) -> None:
    """Values are written by the collective's rendezvous (trnsim.nki.collectives)."""


# Records every program of a rank list issues together, after meeting the others: they order
# the cores of a rank as a core_barrier does (the split forms' prepares do not meet).
SYNCHRONIZING = frozenset(op for op in OPCODES if not op.endswith("_prepare"))

for _op in OPCODES:
    semantics(_op)(_no_data_effect)
