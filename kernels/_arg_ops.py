"""argmax / argmin as partial states for the `arg_reduce` device kernel: per output the extreme
value ("v") and the flat index of its first occurrence ("i", fp32: exact below 2^24).

Layer: kernel library (trnsim.kernels); public NKI API only. The same step serves a tile of
data (positions from iota) and a set of partial states (positions = their indices): take the
extreme value m, mark the elements equal to m (and NaNs: torch's max treats NaN as the
largest value, and so does min), and take the smallest marked position. Float values compare
in fp32 on VectorE; integer values (int32 tiles) find m and the matches exactly on GpSimd.
"""

from __future__ import annotations

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

from . import _intops as io
from . import _rowops as ro

F32 = nl.float32
BIG = float(2**24)  # positions are < 2^24, so pos - BIG and its minimum are exact in fp32
MAX_POSITIONS = 2**24


def select(x, pos, v, i, op, exact: bool) -> None:
    """v, i [p, A] = the op (nl.maximum / nl.minimum) of x [p, A, F] along F and the smallest
    position pos [p, A, F] (fp32) where it (or a NaN) occurs."""
    p, a, f = x.shape
    hit = ro.sbuf((p, a, f), F32, "arg_hit")
    if exact:
        t = ro.sbuf((p, a, f), nl.int32, "arg_tree")
        io.copy(t, x)
        io.tree(t, op, f)
        io.copy(v, t[:, :, 0])
        eq = ro.sbuf((p, a, f), nl.int32, "arg_eq")
        nisa.tensor_tensor(dst=eq, data1=x, data2=ro.bcast(v, f), op=nl.equal, engine=io.GPSIMD)
        nisa.tensor_copy(dst=hit, src=eq)
    else:
        nisa.tensor_reduce(dst=v, op=op, data=x, axis=2)
        nisa.tensor_tensor(dst=hit, data1=x, data2=ro.bcast(v, f), op=nl.equal)
        nan = ro.sbuf((p, a, f), F32, "arg_nan")
        nisa.tensor_tensor(dst=nan, data1=x, data2=x, op=nl.not_equal)
        nisa.tensor_tensor(dst=hit, data1=hit, data2=nan, op=nl.maximum)
    # pos - BIG where marked, pos elsewhere: the minimum is (first marked position) - BIG.
    nisa.scalar_tensor_tensor(
        dst=hit, data=hit, op0=nl.multiply, operand0=-BIG, op1=nl.add, operand1=pos
    )
    nisa.tensor_reduce(dst=i, op=nl.minimum, data=hit, axis=2)
    nisa.tensor_scalar(dst=i, data=i, op0=nl.add, operand0=BIG)


def combine(st: dict, op, exact: bool) -> dict:
    """States [P, A, L] -> [P, A]: the same selection over the L partial states."""
    v, i = st["v"], st["i"]
    p, a, n = v.shape
    if n == 1:
        return {"v": v[:, :, 0], "i": i[:, :, 0]}
    rv = ro.sbuf((p, a), v.dtype, "arg_v")
    ri = ro.sbuf((p, a), F32, "arg_i")
    select(v, i, rv, ri, op, exact)
    return {"v": rv, "i": ri}


def fold(st: dict, op, exact: bool) -> dict:
    """States [P, A] -> [1, A] on partition 0: one SBUF->SBUF DMA per component, then the
    selection along the free axis."""
    p, a = st["v"].shape
    if p == 1:
        return st
    flat = {}
    for c, t in st.items():
        f = ro.sbuf((1, p * a), t.dtype, f"fold_{c}")
        nisa.dma_copy(dst=f, src=t)
        flat[c] = f.reshape((1, p, a)).permute((0, 2, 1))
    return combine(flat, op, exact)
