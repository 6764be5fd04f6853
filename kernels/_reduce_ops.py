"""The reductions of the `reduce` device kernels as partial *states*: how a tile of data becomes
a state (leaf), how states along a free axis combine, how states on several partitions fold
into one partition, and how a state becomes the result (finish).

Layer: kernel library (trnsim.kernels); public NKI API only. A state is a dict of SBUF tiles
[P, A, L] (fp32, or int32 for exact integer reductions): per partition, A outputs, L partial
slots. Components: "v" (sum/prod/max/min/all/any/norms), "m","s" (logsumexp: raw maximum and
sum of exp(x - clamp(m))), "n","mean","m2" (var/std: count, mean, sum of squared deviations,
merged with Chan et al.'s pairwise formulas), "lo","hi" (integer sums with an int64 result:
16-bit split words, `_intops`). Every engine computes in fp32 except the exact integer path
(GpSimd, `_intops`).
"""

from __future__ import annotations

from dataclasses import dataclass

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

from . import _intops as io
from . import _rowops as ro

F32 = nl.float32
FLT_MAX = 3.4028234663852886e38  # largest finite fp32
INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LOG_CLAMP = (2.0**-64, 2.0**64)  # nl.log's valid input range (nki-api.md §8.2)


@dataclass(frozen=True)
class Op:
    """One reduction: kind (simple, lse, var, sum64), ALU op, map applied first, finishing
    step, and whether integer inputs reduce exactly on GpSimd."""

    name: str
    kind: str = "simple"
    alu: object = None
    pre: str | None = None  # "abs", "square", "nonzero"
    post: str | None = None  # "mean", "sqrt"
    exact_int: bool = False
    float_only: bool = False

    @property
    def comps(self) -> tuple[str, ...]:
        return {
            "simple": ("v",),
            "lse": ("m", "s"),
            "var": ("n", "mean", "m2"),
            "sum64": ("lo", "hi"),
        }[self.kind]


OPS = {
    "sum": Op("sum", alu=nl.add, exact_int=True),
    "mean": Op("mean", alu=nl.add, post="mean", float_only=True),
    "prod": Op("prod", alu=nl.multiply, exact_int=True),
    "amax": Op("amax", alu=nl.maximum, exact_int=True),
    "amin": Op("amin", alu=nl.minimum, exact_int=True),
    "all": Op("all", alu=nl.minimum, pre="nonzero"),
    "any": Op("any", alu=nl.maximum, pre="nonzero"),
    "count_nonzero": Op("count_nonzero", alu=nl.add, pre="nonzero"),
    "logsumexp": Op("logsumexp", kind="lse"),
}
NORMS = {
    2: Op("norm", alu=nl.add, pre="square", post="sqrt", float_only=True),
    1: Op("norm", alu=nl.add, pre="abs", float_only=True),
    0: Op("norm", alu=nl.add, pre="nonzero", float_only=True),
    float("inf"): Op("norm", alu=nl.maximum, pre="abs", float_only=True),
    float("-inf"): Op("norm", alu=nl.minimum, pre="abs", float_only=True),
}
SUM64 = Op("sum", kind="sum64", alu=nl.add, exact_int=True)  # integer sum, int64 result
VAR = Op("var", kind="var", float_only=True)
VAR_MEAN = Op("mean", kind="var", post="mean", float_only=True)  # the mean of var_mean


def identity(op: Op, comp: str, exact: bool) -> float | int:
    """The value of an empty slot (partitions a tile did not reach)."""
    if op.kind == "lse":
        return -float("inf") if comp == "m" else 0.0
    if op.kind == "var":
        return 0.0
    if op.kind == "sum64":
        return 0
    name = op.alu.__name__ if hasattr(op.alu, "__name__") else str(op.alu)
    table = {
        "add": (0.0, 0),
        "multiply": (1.0, 1),
        "maximum": (-float("inf"), INT_MIN),
        "minimum": (float("inf"), INT_MAX),
    }
    for key, (f, i) in table.items():
        if key in name:
            return i if exact else f
    raise AssertionError(f"no identity for {name}")


def sbuf(shape, dtype=F32, name="st"):
    return ro.sbuf(tuple(shape), dtype, name)


def new_state(op: Op, p: int, a: int, slots: int, exact: bool, fill: bool) -> dict:
    """Fresh state tiles [p, a, slots]; with fill, every slot holds the identity."""
    st = {}
    for c in op.comps:
        t = sbuf((p, a, slots), nl.int32 if exact else F32, f"st_{c}")
        if fill:
            nisa.memset(dst=t, value=identity(op, c, exact))
        st[c] = t
    return st


def reset(op: Op, st: dict, k: int, exact: bool) -> None:
    """Slot k of every component = the identity."""
    for c, t in st.items():
        nisa.memset(dst=t[:, :, k], value=identity(op, c, exact))


def partition_fold(op: Op) -> bool:
    """Whether `fold` is one GpSimd partition reduce (sums, maxima, minima)."""
    name = getattr(op.alu, "__name__", "")
    return op.kind == "sum64" or (op.kind == "simple" and name in ("add", "maximum", "minimum"))


def _clamp(dst, src) -> None:
    nisa.tensor_scalar(
        dst=dst, data=src, op0=nl.maximum, operand0=-FLT_MAX, op1=nl.minimum, operand1=FLT_MAX
    )


def _map(pre: str, x):
    """fp32 copy of x [p, A, F] with the op's map applied."""
    t = sbuf(x.shape, F32, "mapped")
    if pre == "nonzero":
        nisa.tensor_scalar(dst=t, data=x, op0=nl.not_equal, operand0=0.0)
    else:
        nisa.activation(dst=t, op=nl.abs if pre == "abs" else nl.square, data=x)
    return t


# ---------------------------------------------------------------- leaf: data -> state
def leaf(op: Op, x, d: dict, exact: bool) -> None:
    """Reduce data x [p, A, F] (any dtype; int32 for exact) along F into state slot views d."""
    if op.kind == "lse":
        _leaf_lse(x, d["m"], d["s"])
    elif op.kind == "var":
        _leaf_var(x, d["n"], d["mean"], d["m2"])
    elif op.kind == "sum64":
        lo, hi = sbuf(x.shape, nl.int32, "lo16"), sbuf(x.shape, nl.int32, "hi16")
        io.split16(lo, hi, x)
        for t, c in ((lo, "lo"), (hi, "hi")):
            io.tree(t, nl.add, x.shape[2])
            io.copy(d[c], t[:, :, 0])
        io.carry16(d["lo"], d["hi"])
    elif exact:
        io.tree(x, op.alu, x.shape[2])
        io.copy(d["v"], x[:, :, 0])
    elif op.pre is None:
        nisa.tensor_reduce(dst=d["v"], op=op.alu, data=x, axis=2)
    elif op.pre != "nonzero" and op.alu is nl.add and x.shape[1] == 1:
        # ScalarE maps and sums the row in its accumulator: one instruction.
        t = sbuf(x.shape, F32, "mapped")
        ro.act_rows(t, x, nl.abs if op.pre == "abs" else nl.square, sums=d["v"])
    else:
        nisa.tensor_reduce(dst=d["v"], op=op.alu, data=_map(op.pre, x), axis=2)


def _leaf_lse(x, m, s) -> None:
    p, a, _ = x.shape
    nisa.tensor_reduce(dst=m, op=nl.maximum, data=x, axis=2)
    neg = sbuf((p, a), F32, "neg_max")
    # -clamp(m): an infinite maximum is replaced by the largest finite value, so exp(x - m)
    # stays 0 or inf instead of NaN (torch masks infinite maxima the same way).
    nisa.tensor_scalar(
        dst=neg, data=m, op0=nl.maximum, operand0=-FLT_MAX, op1=nl.minimum, operand1=FLT_MAX
    )
    nisa.tensor_scalar(dst=neg, data=neg, op0=nl.multiply, operand0=-1.0)
    e = sbuf(x.shape, F32, "exp")
    ro.act_rows(e, x, nl.exp, bias=neg, sums=s)


def _leaf_var(x, n, mean, m2) -> None:
    p, a, f = x.shape
    nisa.memset(dst=n, value=float(f))
    neg_mean = sbuf((p, a), F32, "neg_mean")
    nisa.tensor_reduce(dst=neg_mean, op=nl.add, data=x, axis=2, negate=True)
    nisa.tensor_scalar(dst=neg_mean, data=neg_mean, op0=nl.divide, operand0=float(f))
    nisa.tensor_scalar(dst=mean, data=neg_mean, op0=nl.multiply, operand0=-1.0)
    sq = sbuf(x.shape, F32, "sq_dev")
    ro.act_rows(sq, x, nl.square, bias=neg_mean, sums=m2)


# ---------------------------------------------------------------- combine: along L
def combine(op: Op, st: dict, exact: bool) -> dict:
    """Combine state views [P, A, L] along L: a dict of [P, A] views."""
    first = next(iter(st.values()))
    p, a, n = first.shape
    if n == 1:
        return {c: t[:, :, 0] for c, t in st.items()}
    if op.kind == "lse":
        return _combine_lse(st["m"], st["s"])
    if op.kind == "var":
        return _combine_var(st["n"], st["mean"], st["m2"])
    if op.kind == "sum64":
        io.tree(st["lo"], nl.add, n)
        io.tree(st["hi"], nl.add, n)
        res = {c: st[c][:, :, 0] for c in ("lo", "hi")}
        io.carry16(res["lo"], res["hi"])
        return res
    if exact:
        io.tree(st["v"], op.alu, n)
        return {"v": st["v"][:, :, 0]}
    r = sbuf((p, a), F32, "combined")
    nisa.tensor_reduce(dst=r, op=op.alu, data=st["v"], axis=2)
    return {"v": r}


def _combine_lse(m, s) -> dict:
    p, a, n = m.shape
    big = sbuf((p, a), F32, "lse_m")
    nisa.tensor_reduce(dst=big, op=nl.maximum, data=m, axis=2)
    big_c = sbuf((p, a), F32, "lse_mc")
    _clamp(big_c, big)
    mc = sbuf((p, a, n), F32, "lse_parts")
    _clamp(mc, m)
    nisa.tensor_tensor(dst=mc, data1=mc, data2=ro.bcast(big_c, n), op=nl.subtract)
    nisa.activation(dst=mc, op=nl.exp, data=mc)
    nisa.tensor_tensor(dst=mc, data1=mc, data2=s, op=nl.multiply)
    total = sbuf((p, a), F32, "lse_s")
    nisa.tensor_reduce(dst=total, op=nl.add, data=mc, axis=2)
    return {"m": big, "s": total}


def _combine_var(n, mean, m2) -> dict:
    p, a, k = n.shape
    count = sbuf((p, a), F32, "var_n")
    nisa.tensor_reduce(dst=count, op=nl.add, data=n, axis=2)
    w = sbuf((p, a, k), F32, "var_w")
    nisa.tensor_tensor(dst=w, data1=n, data2=mean, op=nl.multiply)
    mu = sbuf((p, a), F32, "var_mean")
    nisa.tensor_reduce(dst=mu, op=nl.add, data=w, axis=2)
    nisa.tensor_tensor(dst=mu, data1=mu, data2=count, op=nl.divide)
    # sum of m2 + n * (mean - mu)^2 over the parts
    nisa.tensor_tensor(dst=w, data1=mean, data2=ro.bcast(mu, k), op=nl.subtract)
    nisa.tensor_tensor(dst=w, data1=w, data2=w, op=nl.multiply)
    nisa.tensor_tensor(dst=w, data1=w, data2=n, op=nl.multiply)
    nisa.tensor_tensor(dst=w, data1=w, data2=m2, op=nl.add)
    tot = sbuf((p, a), F32, "var_m2")
    nisa.tensor_reduce(dst=tot, op=nl.add, data=w, axis=2)
    return {"n": count, "mean": mu, "m2": tot}


# ---------------------------------------------------------------- fold: partitions -> one
def fold(op: Op, st: dict, exact: bool) -> dict:
    """States [P, A] on P partitions as states [1, A] on partition 0."""
    p, a = next(iter(st.values())).shape
    if p == 1:
        return st
    dt = nl.int32 if exact else F32
    name = getattr(op.alu, "__name__", "")
    if op.kind == "sum64":
        res = {}
        for c in ("lo", "hi"):
            res[c] = sbuf((1, a), nl.int32, f"folded_{c}")
            nisa.tensor_partition_reduce(dst=res[c], op=nl.add, data=st[c])
        io.carry16(res["lo"], res["hi"])
        return res
    if op.kind == "simple" and name in ("add", "maximum"):
        # GpSimd reduces across partitions directly (exactly for int32).
        r = sbuf((1, a), dt, "folded")
        nisa.tensor_partition_reduce(dst=r, op=op.alu, data=st["v"])
        return {"v": r}
    if op.kind == "simple" and name == "minimum":
        # min = -max(-x) (fp32 negation is exact), or ~max(~x) for int32 (order-reversing)
        neg = sbuf((p, a), dt, "negated")
        _flip(neg, st["v"], exact)
        r = sbuf((1, a), dt, "folded")
        nisa.tensor_partition_reduce(dst=r, op=nl.maximum, data=neg)
        _flip(r, r, exact)
        return {"v": r}
    # Otherwise one SBUF->SBUF DMA moves the P x A states onto partition 0 (row-major), where
    # they combine along the free axis like the partial slots of one partition.
    flat = {}
    for c, t in st.items():
        f = sbuf((1, p * a), dt, f"fold_{c}")
        nisa.dma_copy(dst=f, src=t)
        flat[c] = f.reshape((1, p, a)).permute((0, 2, 1))
    return combine(op, flat, exact)


def _flip(dst, src, exact: bool) -> None:
    if exact:
        nisa.tensor_scalar(dst=dst, data=src, op0=nl.invert, operand0=None)
    else:
        nisa.tensor_scalar(dst=dst, data=src, op0=nl.multiply, operand0=-1.0)


# ---------------------------------------------------------------- finish: state -> result
def finish(
    op: Op,
    st: dict,
    dst,
    count: int,
    correction: float = 0.0,
    exact: bool = False,
    std: bool = False,
) -> None:
    """Write the result of states [P, A] into dst [P, A] (the output dtype, cast once)."""
    if op.kind == "lse":
        s = sbuf(dst.shape, F32, "lse_log")
        nisa.tensor_scalar(
            dst=s,
            data=st["s"],
            op0=nl.maximum,
            operand0=LOG_CLAMP[0],
            op1=nl.minimum,
            operand1=LOG_CLAMP[1],
        )
        nisa.activation(dst=s, op=nl.log, data=s)
        nisa.tensor_tensor(dst=dst, data1=s, data2=st["m"], op=nl.add)
        return
    if op.kind == "var" and op.post == "mean":
        nisa.tensor_copy(dst=dst, src=st["mean"])
        return
    if op.kind == "var":
        div = max(count - correction, 0.0)
        if std:
            v = sbuf(dst.shape, F32, "var")
            nisa.tensor_scalar(dst=v, data=st["m2"], op0=nl.divide, operand0=div)
            nisa.tensor_scalar(dst=dst, data=v, op0=nl.power, operand0=0.5)
        else:
            nisa.tensor_scalar(dst=dst, data=st["m2"], op0=nl.divide, operand0=div)
        return
    v = st["v"]
    if op.post == "mean":
        nisa.tensor_scalar(dst=dst, data=v, op0=nl.divide, operand0=float(count))
    elif op.post == "sqrt":
        nisa.tensor_scalar(dst=dst, data=v, op0=nl.power, operand0=0.5)
    elif exact:
        io.copy(dst, v)
    else:
        nisa.tensor_copy(dst=dst, src=v)
