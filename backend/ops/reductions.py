"""Reductions: sum, mean, prod, amax/amin, all/any, var/std (+ _mean), vector norms,
count_nonzero, max/min over everything. One launch of trnsim.kernels.reduce each.

Output dtypes follow PyTorch: integer and bool sums and products are int64 (the kernel sums in
exact 32-bit integer arithmetic and writes the int64 words), mean/var/std/norm need floating
inputs, all/any give bool (uint8 for uint8 inputs).
"""

from __future__ import annotations

import torch
from trnsim.backend.ops._common import fit_out, launch, new, scalar
from trnsim.backend.registry import REGISTRY, HostOnly, cpu_overloads, op, reference_only
from trnsim.kernels.reduce import reduce, var, var_mean

_KERNEL_IN = (torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int16,
              torch.int8, torch.uint8, torch.bool, torch.int64)
_FLOATS = (torch.float32, torch.bfloat16, torch.float16)


def _dims(x: torch.Tensor, dim) -> list[int]:
    nd = x.dim()
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return list(range(nd))
    dims = [dim] if isinstance(dim, int) else list(dim)
    out = []
    for d in dims:
        lim = max(nd, 1)
        if not -lim <= d < lim:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-lim}, "
                             f"{lim - 1}], but got {d})")
        out.append(d % lim)
    if len(set(out)) != len(out):
        raise RuntimeError(f"dim {out} appears multiple times in the list of dims")
    return sorted(set(out)) if nd else []


def _shapes(x: torch.Tensor, dims: list[int], keepdim: bool) -> tuple[list[int], list[int]]:
    keep = [1 if i in dims else s for i, s in enumerate(x.shape)]
    shape = keep if keepdim else [s for i, s in enumerate(x.shape) if i not in dims]
    return shape, keep


def _run(name: str, kernel, x: torch.Tensor, dims: list[int], keepdim: bool, dtype, out=None,
         **attrs) -> torch.Tensor:
    if x.dtype not in _KERNEL_IN:
        raise HostOnly(f"{x.dtype} input")
    if dtype not in _KERNEL_IN:  # sum(dtype=torch.float64) of a float32 tensor
        raise HostOnly(f"{dtype} result")
    if x.numel() == 0:
        raise HostOnly("an empty input")
    shape, keep = _shapes(x, dims, keepdim)
    res = new(shape, dtype) if out is None else fit_out(out, shape, dtype, name)
    target = res if res.is_contiguous() else new(shape, dtype)
    view = target.view(keep or [1])
    src = x if x.dim() else x.view(1)
    int64 = tuple(n for n, t in (("x", src), ("out", view)) if t.dtype == torch.int64)
    launch(kernel, view, src, aten_op=f"aten::{name}", names=("out", "x"),
           dims=dims if x.dim() else [0], int64=int64, **attrs)
    if target is not res:
        res.copy_(target)
    return res


def _sum_dtype(x: torch.Tensor, dtype) -> torch.dtype:
    if dtype is not None:
        if not x.is_floating_point() and dtype.is_floating_point:
            raise HostOnly(f"an integer sum into {dtype}")
        return dtype
    return torch.int64 if not x.is_floating_point() and not x.is_complex() else x.dtype


def _float_only(name: str, x: torch.Tensor, dtype=None) -> torch.dtype:
    d = dtype or x.dtype
    if not d.is_floating_point:
        raise RuntimeError(f"{name}(): could not infer output dtype. Input dtype must be either "
                           f"a floating point or complex dtype. Got: {str(d).split('.')[-1]}")
    if d not in _FLOATS or x.dtype not in _FLOATS:
        raise HostOnly(f"{d} result")
    return d


def _bool_dtype(x: torch.Tensor) -> torch.dtype:
    return torch.uint8 if x.dtype == torch.uint8 else torch.bool


# ---------------------------------------------------------------- sum / mean / prod


@op("sum.dim_IntList", kernels="reduce")
def sum_dim(self, dim, keepdim=False, *, dtype=None):
    return _run("sum", reduce, self, _dims(self, dim), keepdim, _sum_dtype(self, dtype), op="sum")


@op("sum.IntList_out", kernels="reduce")
def sum_out(self, dim, keepdim=False, *, dtype=None, out):
    return _run("sum", reduce, self, _dims(self, dim), keepdim, _sum_dtype(self, dtype), out,
                op="sum")


@op("mean.dim", kernels="reduce")
def mean_dim(self, dim, keepdim=False, *, dtype=None):
    d = _float_only("mean", self, dtype)
    return _run("mean", reduce, self, _dims(self, dim), keepdim, d, op="mean")


@op("mean.out", kernels="reduce")
def mean_out(self, dim, keepdim=False, *, dtype=None, out):
    d = _float_only("mean", self, dtype)
    return _run("mean", reduce, self, _dims(self, dim), keepdim, d, out, op="mean")


@op("prod", kernels="reduce")
def prod(self, *, dtype=None):
    return _run("prod", reduce, self, _dims(self, None), False, _sum_dtype(self, dtype),
                op="prod")


@op("prod.dim_int", kernels="reduce")
def prod_dim(self, dim, keepdim=False, *, dtype=None):
    return _run("prod", reduce, self, _dims(self, dim), keepdim, _sum_dtype(self, dtype),
                op="prod")


@op("prod.int_out", kernels="reduce")
def prod_out(self, dim, keepdim=False, *, dtype=None, out):
    return _run("prod", reduce, self, _dims(self, dim), keepdim, _sum_dtype(self, dtype), out,
                op="prod")


# ---------------------------------------------------------------- max / min


def _minmax(name: str, kop: str, self, dim, keepdim, out=None):
    if self.numel() == 0:
        raise RuntimeError(f"{name}(): Expected reduction dim to be specified for input.numel() "
                           "== 0. Specify the reduction dim with the 'dim' argument.")
    return _run(name, reduce, self, _dims(self, dim), keepdim, self.dtype, out, op=kop)


@op("amax", kernels="reduce")
def amax(self, dim=(), keepdim=False):
    return _minmax("amax", "amax", self, dim, keepdim)


@op("amax.out", kernels="reduce")
def amax_out(self, dim=(), keepdim=False, *, out):
    return _minmax("amax", "amax", self, dim, keepdim, out)


@op("amin", kernels="reduce")
def amin(self, dim=(), keepdim=False):
    return _minmax("amin", "amin", self, dim, keepdim)


@op("amin.out", kernels="reduce")
def amin_out(self, dim=(), keepdim=False, *, out):
    return _minmax("amin", "amin", self, dim, keepdim, out)


@op("max", kernels="reduce")
def max_all(self):
    return _minmax("max", "amax", self, None, False)


@op("max.unary_out", kernels="reduce")
def max_all_out(self, *, out):
    return _minmax("max", "amax", self, None, False, out)


@op("min", kernels="reduce")
def min_all(self):
    return _minmax("min", "amin", self, None, False)


@op("min.unary_out", kernels="reduce")
def min_all_out(self, *, out):
    return _minmax("min", "amin", self, None, False, out)


# ---------------------------------------------------------------- all / any / count


def _logical(name: str, self, dim, keepdim, out=None):
    return _run(name, reduce, self, _dims(self, dim), keepdim, _bool_dtype(self), out, op=name)


for _name in ("all", "any"):
    op(f"{_name}", kernels="reduce")(
        lambda self, _n=_name: _logical(_n, self, None, False))
    op(f"{_name}.all_out", kernels="reduce")(
        lambda self, *, out, _n=_name: _logical(_n, self, None, False, out))
    op(f"{_name}.dim", kernels="reduce")(
        lambda self, dim, keepdim=False, _n=_name: _logical(_n, self, dim, keepdim))
    op(f"{_name}.dims", kernels="reduce")(
        lambda self, dim=None, keepdim=False, _n=_name: _logical(_n, self, dim, keepdim))
    op(f"{_name}.out", kernels="reduce")(
        lambda self, dim, keepdim=False, *, out, _n=_name: _logical(_n, self, dim, keepdim, out))
    op(f"{_name}.dims_out", kernels="reduce")(
        lambda self, dim=None, keepdim=False, *, out, _n=_name:
        _logical(_n, self, dim, keepdim, out))


@op("count_nonzero.dim_IntList", kernels="reduce")
def count_nonzero(self, dim):
    return _run("count_nonzero", reduce, self, _dims(self, dim), False, torch.int64,
                op="count_nonzero")


# ---------------------------------------------------------------- var / std / norm


def _correction(correction) -> float:
    return 1.0 if correction is None else float(scalar(correction))


@op("var.correction", kernels="var")
def var_correction(self, dim=None, *, correction=None, keepdim=False):
    d = _float_only("var", self)
    return _run("var", var, self, _dims(self, dim), keepdim, d, correction=_correction(correction))


@op("var.correction_out", kernels="var")
def var_correction_out(self, dim=None, *, correction=None, keepdim=False, out):
    d = _float_only("var", self)
    return _run("var", var, self, _dims(self, dim), keepdim, d, out,
                correction=_correction(correction))


@op("std.correction", kernels="var")
def std_correction(self, dim=None, *, correction=None, keepdim=False):
    from trnsim.kernels.reduce import std

    d = _float_only("std", self)
    return _run("std", std, self, _dims(self, dim), keepdim, d, correction=_correction(correction))


def _var_mean(name: str, self, dim, correction, keepdim, as_std: bool):
    d = _float_only(name, self)
    if self.numel() == 0:
        raise HostOnly("an empty input")
    dims = _dims(self, dim)
    shape, keep = _shapes(self, dims, keepdim)
    v, m = new(shape, d), new(shape, d)
    src = self if self.dim() else self.view(1)
    launch(var_mean, v.view(keep or [1]), m.view(keep or [1]), src, aten_op=f"aten::{name}",
           names=("var_out", "mean_out", "x"), dims=dims if self.dim() else [0],
           correction=_correction(correction), std=as_std)
    return v, m


@op("var_mean.correction", kernels="var_mean")
def var_mean_correction(self, dim=None, *, correction=None, keepdim=False):
    return _var_mean("var_mean", self, dim, correction, keepdim, False)


@op("std_mean.correction", kernels="var_mean")
def std_mean_correction(self, dim=None, *, correction=None, keepdim=False):
    return _var_mean("std_mean", self, dim, correction, keepdim, True)


def _norm(self, ord, dim, keepdim, dtype, out=None):
    p = float(scalar(ord))
    if p not in (2.0, 1.0, float("inf"), float("-inf"), 0.0):
        raise HostOnly(f"ord={p}")
    d = _float_only("linalg.vector_norm", self, dtype)
    return _run("linalg_vector_norm", reduce, self, _dims(self, dim), keepdim, d, out, op="norm",
                p=p)


@op("linalg_vector_norm", kernels="reduce")
def vector_norm(self, ord=2, dim=None, keepdim=False, *, dtype=None):
    return _norm(self, ord, dim, keepdim, dtype)


@op("linalg_vector_norm.out", kernels="reduce")
def vector_norm_out(self, ord=2, dim=None, keepdim=False, *, dtype=None, out):
    return _norm(self, ord, dim, keepdim, dtype, out)




# ---------------------------------------------------------------- values and indices


def _arg(name: str, kop: str, self, dim, keepdim, with_values: bool, outs=None):
    from trnsim.kernels.reduce import arg_reduce

    if self.dtype not in _KERNEL_IN:
        raise HostOnly(f"{self.dtype} input")
    if self.numel() == 0:
        raise HostOnly("an empty input")
    if dim is None:
        shape = [1] * self.dim() if keepdim else []
        keep, kdim = [1], None
    else:
        d = _dims(self, dim)[0] if self.dim() else 0
        shape, keep = _shapes(self, [d] if self.dim() else [], keepdim)
        keep, kdim = (keep or [1]), d
    if outs is None:
        values = new(shape, self.dtype) if with_values else None
        indices = new(shape, torch.int64)
    else:
        values = None if outs[0] is None else fit_out(outs[0], shape, self.dtype, name)
        indices = fit_out(outs[1], shape, torch.int64, name)
    src = self if self.dim() else self.view(1)
    int64 = ("x",) if self.dtype == torch.int64 else ()
    launch(arg_reduce, None if values is None else values.view(keep), indices.view(keep), src,
           aten_op=f"aten::{name}", names=("values", "indices", "x"), dim=kdim, op=kop,
           int64=int64)
    return (values, indices) if with_values else indices


@op("max.dim", kernels="arg_reduce")
def max_dim(self, dim, keepdim=False):
    return _arg("max", "max", self, dim, keepdim, True)


@op("max.dim_max", kernels="arg_reduce")
def max_dim_out(self, dim, keepdim=False, *, max, max_values):
    return _arg("max", "max", self, dim, keepdim, True, (max, max_values))


@op("min.dim", kernels="arg_reduce")
def min_dim(self, dim, keepdim=False):
    return _arg("min", "min", self, dim, keepdim, True)


@op("min.dim_min", kernels="arg_reduce")
def min_dim_out(self, dim, keepdim=False, *, min, min_indices):
    return _arg("min", "min", self, dim, keepdim, True, (min, min_indices))


@op("argmax", kernels="arg_reduce")
def argmax(self, dim=None, keepdim=False):
    return _arg("argmax", "max", self, dim, keepdim, False)


@op("argmin", kernels="arg_reduce")
def argmin(self, dim=None, keepdim=False):
    return _arg("argmin", "min", self, dim, keepdim, False)


@op("argmax.out", kernels="arg_reduce")
def argmax_out(self, dim=None, keepdim=False, *, out):
    return _arg("argmax", "max", self, dim, keepdim, False, (None, out))


@op("argmin.out", kernels="arg_reduce")
def argmin_out(self, dim=None, keepdim=False, *, out):
    return _arg("argmin", "min", self, dim, keepdim, False, (None, out))


REDUCTIONS = [
    "sum", "mean", "prod", "amax", "amin", "max", "min", "argmax", "argmin", "aminmax", "all",
    "any", "var", "std", "var_mean", "std_mean", "linalg_vector_norm", "norm", "cumsum",
    "cumprod", "nansum", "count_nonzero", "hash_tensor", "_aminmax",
    "_assert_async", "_functional_assert_async", "_make_dep_token",  # checks of a reduced value
]

reference_only(*(n for n in cpu_overloads(*REDUCTIONS) if n not in REGISTRY),
               group="reductions")
