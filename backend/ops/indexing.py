"""Indexing and data movement on the device: cat, index_select (embedding), advanced indexing
and index_put_, index_add, gather/scatter, embedding backward, cumsum/cumprod; the rest of the
family (sorts, unique, masks with data-dependent shapes, ...) is reference only.

Indices are read from their low 32 bits on the device (docs/device-kernels.md), so int64
index tensors are checked to lie in int32 range first; boolean masks (whose result shape
depends on the data) run on the host.
"""

from __future__ import annotations

from typing import Any

import torch
from trnsim.backend import storage
from trnsim.backend.ops._common import launch, new
from trnsim.backend.ops._meta import check_int64_range, run_meta, scalar_of
from trnsim.backend.registry import REGISTRY, HostOnly, cpu_overloads, op, reference_only
from trnsim.backend.runtime import runtime
from trnsim.kernels import concat, indexing, scan

DATA_DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int16,
               torch.int8, torch.uint8, torch.bool, torch.int64)
INDEX_DTYPES = (torch.int32, torch.int64)


def _data(*ts: torch.Tensor | None) -> None:
    for t in ts:
        if t is not None and t.dtype not in DATA_DTYPES:
            raise HostOnly(f"{t.dtype} data")


def _index(t: torch.Tensor, what: str = "index") -> None:
    if t.dtype not in INDEX_DTYPES:
        raise HostOnly(f"{t.dtype} {what}")
    check_int64_range(t, what)


def _pairs(**named: Any) -> tuple[str, ...]:
    """The int64 argument names for a kernel's int64= (lists as name.k)."""
    out = []
    for name, t in named.items():
        if isinstance(t, (list, tuple)):
            out += [f"{name}.{k}" for k, x in enumerate(t)
                    if isinstance(x, torch.Tensor) and x.dtype == torch.int64]
        elif isinstance(t, torch.Tensor) and t.dtype == torch.int64:
            out.append(name)
    return tuple(out)


def _out_like(meta: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    rt = runtime()
    if out is None:
        return storage.empty_strided(rt, meta.shape, meta.stride(), meta.dtype)
    if list(out.shape) != list(meta.shape):
        storage.resize(rt, out, meta.shape)
    return out


# ---------------------------------------------------------------- cat


def _cat(tensors, dim, out=None):
    meta = run_meta(torch.ops.aten.cat.default, (list(tensors), dim), {})
    res = _out_like(meta, out)
    if res.numel() == 0:
        return res
    _data(res, *tensors)
    for t in tensors:
        check_int64_range(t, "input")
    launch(concat.cat, res, list(tensors), aten_op="aten::cat", names=("out", "inputs"),
           dim=dim, int64=_pairs(out=res, inputs=list(tensors)))
    return res


op("cat", kernels="cat")(lambda tensors, dim=0: _cat(tensors, dim))
op("cat.out", kernels="cat")(lambda tensors, dim=0, *, out: _cat(tensors, dim, out))


# ---------------------------------------------------------------- index_select / embedding


def _index_select(self, dim, index, out=None):
    meta = run_meta(torch.ops.aten.index_select.default, (self, dim, index), {})
    res = _out_like(meta, out)
    if res.numel() == 0:
        return res
    _data(self)
    _index(index)
    launch(indexing.index_select, res, self if self.dim() else self.view(1),
           index if index.dim() else index.view(1), aten_op="aten::index_select",
           names=("out", "self", "index"), dim=dim if self.dim() else 0,
           int64=_pairs(out=res, x=self, index=index))
    return res


op("index_select", kernels="index_select")(
    lambda self, dim, index: _index_select(self, dim, index))
op("index_select.out", kernels="index_select")(
    lambda self, dim, index, *, out: _index_select(self, dim, index, out))


@op("embedding_dense_backward", kernels="embedding_backward")
def embedding_dense_backward(grad_output, indices, num_weights, padding_idx,
                             scale_grad_by_freq):
    _data(grad_output)
    _index(indices, "indices")
    d = grad_output.shape[-1]
    gw = new((num_weights, d), grad_output.dtype)
    if gw.numel() == 0:
        return gw
    if grad_output.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise HostOnly(f"{grad_output.dtype} gradient")
    if indices.dim() == 0:  # one token: a batch of one
        indices, grad_output = indices.view(1), grad_output.view(1, d)
    launch(indexing.embedding_backward, gw, grad_output, indices,
           aten_op="aten::embedding_dense_backward",
           names=("grad_weight", "grad_output", "indices"), padding_idx=int(padding_idx),
           scale_grad_by_freq=bool(scale_grad_by_freq), int64=_pairs(indices=indices))
    return gw


# ---------------------------------------------------------------- advanced indexing


def _index_list(indices) -> list:
    idx = list(indices)
    for t in idx:
        if t is not None:
            if t.dtype in (torch.bool, torch.uint8):
                raise HostOnly("a boolean mask index (its result's shape depends on the data)")
            _index(t)
    present = [t for t in idx if t is not None]
    if len(present) > 1:  # the kernel takes index tensors of one shape
        present = list(torch.broadcast_tensors(*present))
        it = iter(present)
        idx = [None if t is None else next(it) for t in idx]
    return idx


@op("index.Tensor", kernels="index")
def index_tensor(self, indices):
    idx = _index_list(indices)
    meta = run_meta(torch.ops.aten.index.Tensor, (self, list(indices)), {})
    res = _out_like(meta)
    if res.numel() == 0:
        return res
    _data(self)
    launch(indexing.index, res, self, idx, aten_op="aten::index",
           names=("out", "self", "indices"), int64=_pairs(out=res, x=self, indices=idx))
    return res


@op("_index_put_impl_", kernels="index_put")
def index_put_impl_(self, indices, values, accumulate=False, unsafe=False):
    idx = _index_list(indices)
    _data(self, values)
    if accumulate and self.dtype == torch.int64:
        raise HostOnly("int64 accumulation")
    target = run_meta(torch.ops.aten.index.Tensor, (self, list(indices)), {})
    if target.numel() == 0:
        return self
    vals = values.expand(target.shape) if list(values.shape) != list(target.shape) else values
    if vals.dtype != self.dtype:
        vals = vals.to(self.dtype)
    check_int64_range(vals, "value")
    launch(indexing.index_put, self, idx, vals, aten_op="aten::index_put_",
           names=("self", "indices", "values"), accumulate=bool(accumulate),
           int64=_pairs(out=self, indices=idx, values=vals))
    return self


# ---------------------------------------------------------------- index_add, gather, scatter


def _index_add_into(res, dim, index, source, alpha):
    if source.numel() == 0:
        return res
    if res.dtype not in (torch.float32, torch.bfloat16, torch.float16, torch.int32):
        raise HostOnly(f"{res.dtype} accumulation")
    _index(index)
    launch(indexing.index_add, res, index, source.to(res.dtype), aten_op="aten::index_add",
           names=("self", "index", "source"), dim=dim, alpha=float(scalar_of(alpha)),
           int64=_pairs(index=index))
    return res


@op("index_add_", kernels="index_add")
def index_add_(self, dim, index, source, *, alpha=1):
    run_meta(torch.ops.aten.index_add_.default, (self, dim, index, source), {"alpha": alpha})
    return _index_add_into(self, dim, index, source, alpha)


@op("index_add", kernels="index_add")
def index_add(self, dim, index, source, *, alpha=1):
    return index_add_out(self, dim, index, source, alpha=alpha, out=None)


@op("index_add.out", kernels="index_add")
def index_add_out(self, dim, index, source, *, alpha=1, out):
    meta = run_meta(torch.ops.aten.index_add.default, (self, dim, index, source),
                    {"alpha": alpha})
    res = _out_like(meta, out)
    res.copy_(self)
    return _index_add_into(res, dim, index, source, alpha)


def _gather(self, dim, index, sparse_grad=False, out=None):
    meta = run_meta(torch.ops.aten.gather.default, (self, dim, index), {})
    res = _out_like(meta, out)
    if res.numel() == 0:
        return res
    _data(self)
    _index(index)
    launch(indexing.gather, res, self, index, aten_op="aten::gather",
           names=("out", "self", "index"), dim=dim, int64=_pairs(out=res, x=self, index=index))
    return res


op("gather", kernels="gather")(
    lambda self, dim, index, *, sparse_grad=False: _gather(self, dim, index))
op("gather.out", kernels="gather")(
    lambda self, dim, index, *, sparse_grad=False, out: _gather(self, dim, index, out=out))


_REDUCE = {None: None, "add": "add", "multiply": "multiply", "sum": "add", "prod": "multiply"}


def _scatter_into(res, dim, index, src, reduce):
    if index.numel() == 0:
        return res
    kred = _REDUCE.get(reduce, "unknown")
    if kred == "unknown":
        raise HostOnly(f"reduce={reduce!r}")
    _index(index)
    _data(res)
    if isinstance(src, torch.Tensor):
        _data(src)
        launch(indexing.scatter, res, index, src.to(res.dtype), aten_op="aten::scatter",
               names=("self", "index", "src"), dim=dim, reduce=kred,
               int64=_pairs(out=res, index=index, src=src.to(res.dtype)))
    else:
        launch(indexing.scatter_value, res, index, aten_op="aten::scatter",
               names=("self", "index"), value=scalar_of(src), dim=dim, reduce=kred,
               int64=_pairs(out=res, index=index))
    return res


def _scatter_functional(overload, self, dim, index, src, reduce=None, out=None, **kw):
    meta = run_meta(overload, (self, dim, index, src), kw)
    res = _out_like(meta, out)
    res.copy_(self)
    return _scatter_into(res, dim, index, src, reduce)


def _register_scatter() -> None:
    a = torch.ops.aten
    op("scatter.src", kernels="scatter")(
        lambda self, dim, index, src: _scatter_functional(a.scatter.src, self, dim, index, src))
    op("scatter.value", kernels="scatter")(
        lambda self, dim, index, value: _scatter_functional(a.scatter.value, self, dim, index,
                                                            value))
    op("scatter_.src", kernels="scatter")(
        lambda self, dim, index, src: _scatter_into(self, dim, index, src, None))
    op("scatter_.value", kernels="scatter")(
        lambda self, dim, index, value: _scatter_into(self, dim, index, value, None))
    op("scatter_.reduce", kernels="scatter")(
        lambda self, dim, index, src, *, reduce: _scatter_into(self, dim, index, src, reduce))
    op("scatter_.value_reduce", kernels="scatter")(
        lambda self, dim, index, value, *, reduce: _scatter_into(self, dim, index, value,
                                                                 reduce))
    op("scatter_add", kernels="scatter")(
        lambda self, dim, index, src: _scatter_functional(a.scatter_add.default, self, dim,
                                                          index, src, "add"))
    op("scatter_add_", kernels="scatter")(
        lambda self, dim, index, src: _scatter_into(self, dim, index, src, "add"))


_register_scatter()


# ---------------------------------------------------------------- cumulative sums


def _scan(name: str, kernel, self, dim, dtype=None, out=None):
    overload = getattr(torch.ops.aten, name).default
    meta = run_meta(overload, (self, dim), {"dtype": dtype})
    res = _out_like(meta, out)
    if res.numel() == 0:
        return res
    _data(self)
    check_int64_range(self, "input")
    if res.dtype not in (torch.float32, torch.bfloat16, torch.float16, torch.int32,
                         torch.int64):
        raise HostOnly(f"{res.dtype} result")
    if self.is_floating_point() != res.is_floating_point():
        raise HostOnly(f"{self.dtype} to {res.dtype}")
    launch(kernel, res, self if self.dim() else self.view(1), aten_op=f"aten::{name}",
           names=("out", "self"), dim=dim if self.dim() else 0, int64=_pairs(out=res, x=self))
    return res


for _name, _kernel in (("cumsum", scan.cumsum), ("cumprod", scan.cumprod)):
    op(_name, kernels=_name)(lambda self, dim, *, dtype=None, _n=_name, _k=_kernel:
                             _scan(_n, _k, self, dim, dtype))
    op(f"{_name}.out", kernels=_name)(
        lambda self, dim, *, dtype=None, out, _n=_name, _k=_kernel:
        _scan(_n, _k, self, dim, dtype, out))


reference_only(*(n for n in cpu_overloads(
    "cat", "index_select", "index", "_index_put_impl", "index_add", "index_copy", "index_fill",
    "gather", "scatter", "scatter_add", "scatter_reduce", "masked_scatter",
    "masked_select", "nonzero", "take", "put", "flip", "roll", "sort", "topk",
    "argsort", "unique_dim", "_unique2", "unique_consecutive", "searchsorted", "bucketize",
    "repeat_interleave", "bincount", "equal", "isin", "kthvalue", "median", "mode",
    "nanmedian", "_embedding_bag", "_embedding_bag_backward", "diag_embed", "trace",
    "constant_pad_nd", "reflection_pad2d", "replication_pad2d", "complex", "polar",
    "cumsum", "cumprod", "embedding_dense_backward", "embedding_renorm", "_cummax_helper",
    "_cummin_helper", "_logcumsumexp", "index_reduce", "nonzero_static", "unfold_backward",
    "_embedding_bag_forward_only", "_embedding_bag_dense_backward",
    "_embedding_bag_per_sample_weights_backward", "segment_reduce", "_segment_reduce_backward",
    "narrow_copy", "_unique", "unique_dim_consecutive", "_stack", "histogram",
    "_histogramdd_bin_edges", "_histogramdd_from_bin_cts", "_histogramdd_from_bin_tensors")
    if n not in REGISTRY), group="indexing")
