"""Kernels on a multi-core launch (`kernel[2]`, LNC=2): each program takes a disjoint share of
the work, so the two physical cores of a logical NeuronCore write different parts of the
result: independent work items (the tiles of an elementwise op), or gemm's products.

Layer: kernel library (trnsim.kernels); public NKI API only (nl.program_id, nl.num_programs).
"""

from __future__ import annotations

from typing import Any

from trnsim.nki import language as nl

from ._gemm_plan import Problem
from ._kmajor import Mat

TILE_M = 128  # result partitions per nc_matmul (gemm_stationary_fmax): the row split's grain
TILE_N = 512  # columns per PSUM bank of fp32 results: the column split's grain


def share(items: list[Any]) -> list[Any]:
    """This program's contiguous part of independent work items (all of them on one core)."""
    n, pid = nl.num_programs(), nl.program_id(0)
    if n == 1:
        return items
    k = len(items)  # program p takes items ceil(k*p/n) .. ceil(k*(p+1)/n): a lone one is 0's
    return items[-(-k * pid // n):-(-k * (pid + 1) // n)]


def gemm_share(problems: list[Problem]) -> list[Problem]:
    """This program's problems: whole batch entries when there are enough of them, else a
    column (or row) range of the one product in whole 512-column (128-row) tiles. A product
    too small to split stays with program 0; the other programs then have nothing to do."""
    n, pid = nl.num_programs(), nl.program_id(0)
    if n == 1:
        return problems
    if len(problems) >= n:
        return share(problems)
    (p,) = problems
    cols, rows = p.out.cols, p.out.rows
    if cols >= n * TILE_N:
        lo, hi = _tile_range(cols, TILE_N, pid, n)
        return [_columns(p, lo, hi)] if hi > lo else []
    if rows >= n * TILE_M:
        lo, hi = _tile_range(rows, TILE_M, pid, n)
        return [_rows(p, lo, hi)] if hi > lo else []
    return problems if pid == 0 else []


def _tile_range(size: int, grain: int, pid: int, n: int) -> tuple[int, int]:
    tiles = -(-size // grain)
    lo, hi = tiles * pid // n, tiles * (pid + 1) // n
    return lo * grain, min(size, hi * grain)


def _cols(m: Mat, lo: int, hi: int) -> Mat:
    return Mat(m.t, m.rows, hi - lo, m.rs, m.cs, m.at(0, lo))


def _columns(p: Problem, lo: int, hi: int) -> Problem:
    """Columns lo..hi of out (and of b and c; a^T is shared)."""
    c = None if p.c is None else _cols(p.c, lo, hi)
    return Problem(_cols(p.out, lo, hi), p.a_t, _cols(p.b, lo, hi), c)


def _rows(p: Problem, lo: int, hi: int) -> Problem:
    """Rows lo..hi of out (and of c; the columns of a^T; b is shared)."""
    c = None if p.c is None else _cols(p.c.T, lo, hi).T
    return Problem(_cols(p.out.T, lo, hi).T, _cols(p.a_t, lo, hi), p.b, c)
