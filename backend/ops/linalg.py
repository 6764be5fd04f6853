"""Matrix products on the Tensor Engine: mm, addmm, bmm, baddbmm, mv, addmv, dot.

Each runs as one launch of `trnsim.kernels.gemm` (out = beta*c + alpha*a@b, any strides and
batch broadcast): linear layers arrive here as addmm/mm with the weight's transposed view,
matmul as mm/bmm, and their backward as products of transposed views.
"""

from __future__ import annotations

import torch
from trnsim.backend.ops._common import (
    fit_out,
    launch,
    new,
    require_float,
    require_nonempty,
    scalar,
)
from trnsim.backend.registry import cpu_overloads, op, reference_only, reference_rest
from trnsim.kernels.gemm import gemm

_DONE = {"mm", "mm.out", "addmm", "addmm.out", "addmm_", "bmm", "bmm.out", "baddbmm",
         "baddbmm.out", "baddbmm_", "mv", "mv.out", "addmv", "addmv.out", "addmv_", "dot",
         "dot.out"}


def _shapes_2d(name: str, a: torch.Tensor, b: torch.Tensor) -> tuple[int, int, int]:
    if a.dim() != 2 or b.dim() != 2:
        raise RuntimeError(f"{name}: expected 2-D tensors, got {a.dim()}-D and {b.dim()}-D")
    if a.shape[1] != b.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({a.shape[0]}x"
                           f"{a.shape[1]} and {b.shape[0]}x{b.shape[1]})")
    return a.shape[0], a.shape[1], b.shape[1]


def _shapes_3d(name: str, a: torch.Tensor, b: torch.Tensor) -> tuple[int, int, int, int]:
    if a.dim() != 3 or b.dim() != 3:
        raise RuntimeError(f"{name}: batch1 must be a 3D tensor, batch2 must be a 3D tensor")
    if a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{a.shape[0]}, {a.shape[2]}] but got: [{b.shape[0]}, "
                           f"{b.shape[1]}].")
    return a.shape[0], a.shape[1], a.shape[2], b.shape[2]


def _gemm(name: str, out: torch.Tensor, a: torch.Tensor, b: torch.Tensor,
          c: torch.Tensor | None = None, alpha: float = 1.0, beta: float = 0.0) -> torch.Tensor:
    if out.numel() == 0:
        return out
    if a.numel() == 0 or b.numel() == 0:  # K = 0: out = beta * c (PyTorch: zeros without c)
        require_nonempty(a)
    alpha, beta = float(scalar(alpha)), float(scalar(beta))
    if c is None or beta == 0.0:
        launch(gemm, out, a, b, aten_op=name, names=("out", "a", "b"), alpha=alpha, beta=0.0)
    else:
        launch(gemm, out, a, b, aten_op=name, names=("out", "a", "b"), c=c, alpha=alpha, beta=beta)
    return out


# ---------------------------------------------------------------- mm / addmm


@op("mm", kernels="gemm")
def mm(self, mat2):
    dtype = require_float("mm", self, mat2)
    m, _, n = _shapes_2d("mm", self, mat2)
    return _gemm("aten::mm", new((m, n), dtype), self, mat2, alpha=1.0)


@op("mm.out", kernels="gemm")
def mm_out(self, mat2, *, out):
    dtype = require_float("mm", self, mat2)
    m, _, n = _shapes_2d("mm", self, mat2)
    return _gemm("aten::mm", fit_out(out, (m, n), dtype, "mm"), self, mat2)


def _addmm_c(name: str, c: torch.Tensor, m: int, n: int) -> torch.Tensor:
    try:
        torch.broadcast_shapes(tuple(c.shape), (m, n))
    except RuntimeError:
        raise RuntimeError(f"{name}: the input of shape {list(c.shape)} does not broadcast to "
                           f"the product's [{m}, {n}]") from None
    return c


@op("addmm", kernels="gemm")
def addmm(self, mat1, mat2, *, beta=1, alpha=1):
    dtype = require_float("addmm", self, mat1, mat2)
    m, _, n = _shapes_2d("addmm", mat1, mat2)
    c = _addmm_c("addmm", self, m, n)
    return _gemm("aten::addmm", new((m, n), dtype), mat1, mat2, c, alpha, beta)


@op("addmm.out", kernels="gemm")
def addmm_out(self, mat1, mat2, *, beta=1, alpha=1, out):
    dtype = require_float("addmm", self, mat1, mat2)
    m, _, n = _shapes_2d("addmm", mat1, mat2)
    c = _addmm_c("addmm", self, m, n)
    if out.data_ptr() == c.data_ptr() and out.shape == c.shape:
        c = c.clone()  # the kernel reads c while it writes out
    return _gemm("aten::addmm", fit_out(out, (m, n), dtype, "addmm"), mat1, mat2, c, alpha,
                 beta)


@op("addmm_", kernels="gemm")
def addmm_(self, mat1, mat2, *, beta=1, alpha=1):
    require_float("addmm_", self, mat1, mat2)
    m, _, n = _shapes_2d("addmm_", mat1, mat2)
    if list(self.shape) != [m, n]:
        raise RuntimeError(f"addmm_: self has shape {list(self.shape)}, the product [{m}, {n}]")
    # The epilogue reads each tile of c before it writes that tile of out.
    return _gemm("aten::addmm_", self, mat1, mat2, self, alpha, beta)


# ---------------------------------------------------------------- bmm / baddbmm


@op("bmm", kernels="gemm")
def bmm(self, mat2):
    dtype = require_float("bmm", self, mat2)
    bsz, m, _, n = _shapes_3d("bmm", self, mat2)
    return _gemm("aten::bmm", new((bsz, m, n), dtype), self, mat2, alpha=1.0)


@op("bmm.out", kernels="gemm")
def bmm_out(self, mat2, *, out):
    dtype = require_float("bmm", self, mat2)
    bsz, m, _, n = _shapes_3d("bmm", self, mat2)
    return _gemm("aten::bmm", fit_out(out, (bsz, m, n), dtype, "bmm"), self, mat2)


@op("baddbmm", kernels="gemm")
def baddbmm(self, batch1, batch2, *, beta=1, alpha=1):
    dtype = require_float("baddbmm", self, batch1, batch2)
    bsz, m, _, n = _shapes_3d("baddbmm", batch1, batch2)
    return _gemm("aten::baddbmm", new((bsz, m, n), dtype), batch1, batch2, self, alpha, beta)


@op("baddbmm.out", kernels="gemm")
def baddbmm_out(self, batch1, batch2, *, beta=1, alpha=1, out):
    dtype = require_float("baddbmm", self, batch1, batch2)
    bsz, m, _, n = _shapes_3d("baddbmm", batch1, batch2)
    c = self.clone() if out.data_ptr() == self.data_ptr() else self
    return _gemm("aten::baddbmm", fit_out(out, (bsz, m, n), dtype, "baddbmm"), batch1, batch2,
                 c, alpha, beta)


@op("baddbmm_", kernels="gemm")
def baddbmm_(self, batch1, batch2, *, beta=1, alpha=1):
    require_float("baddbmm_", self, batch1, batch2)
    return _gemm("aten::baddbmm_", self, batch1, batch2, self, alpha, beta)


# ---------------------------------------------------------------- vectors


def _mv_check(name: str, a: torch.Tensor, v: torch.Tensor) -> int:
    if a.dim() != 2 or v.dim() != 1 or a.shape[1] != v.shape[0]:
        raise RuntimeError(f"size mismatch, got input ({a.shape[0] if a.dim() else 0}), mat "
                           f"({'x'.join(map(str, a.shape))}), vec ({v.shape[0] if v.dim() else 0})")
    return a.shape[0]


@op("mv", kernels="gemm")
def mv(self, vec):
    dtype = require_float("mv", self, vec)
    m = _mv_check("mv", self, vec)
    out = new((m,), dtype)
    _gemm("aten::mv", out.unsqueeze(1), self, vec.unsqueeze(1))
    return out


@op("mv.out", kernels="gemm")
def mv_out(self, vec, *, out):
    dtype = require_float("mv", self, vec)
    m = _mv_check("mv", self, vec)
    fit_out(out, (m,), dtype, "mv")
    _gemm("aten::mv", out.unsqueeze(1), self, vec.unsqueeze(1))
    return out


@op("addmv", kernels="gemm")
def addmv(self, mat, vec, *, beta=1, alpha=1):
    dtype = require_float("addmv", self, mat, vec)
    m = _mv_check("addmv", mat, vec)
    out = new((m,), dtype)
    c = self.reshape(-1, 1) if self.dim() == 1 else self
    _gemm("aten::addmv", out.unsqueeze(1), mat, vec.unsqueeze(1), c, alpha, beta)
    return out


@op("addmv.out", kernels="gemm")
def addmv_out(self, mat, vec, *, beta=1, alpha=1, out):
    dtype = require_float("addmv", self, mat, vec)
    m = _mv_check("addmv", mat, vec)
    c = (self.reshape(-1, 1) if self.dim() == 1 else self).clone()
    fit_out(out, (m,), dtype, "addmv")
    _gemm("aten::addmv", out.unsqueeze(1), mat, vec.unsqueeze(1), c, alpha, beta)
    return out


@op("addmv_", kernels="gemm")
def addmv_(self, mat, vec, *, beta=1, alpha=1):
    require_float("addmv_", self, mat, vec)
    _mv_check("addmv_", mat, vec)
    _gemm("aten::addmv_", self.unsqueeze(1), mat, vec.unsqueeze(1), self.unsqueeze(1), alpha,
          beta)
    return self


def _dot_check(a: torch.Tensor, b: torch.Tensor) -> None:
    if a.dim() != 1 or b.dim() != 1:
        raise RuntimeError(f"1D tensors expected, but got {a.dim()}D and {b.dim()}D tensors")
    if a.shape[0] != b.shape[0]:
        raise RuntimeError(f"inconsistent tensor size, expected tensor [{a.shape[0]}] and src "
                           f"[{b.shape[0]}] to have the same number of elements, but got "
                           f"{a.shape[0]} and {b.shape[0]} elements respectively")


@op("dot", kernels="gemm")
def dot(self, tensor):
    dtype = require_float("dot", self, tensor)
    _dot_check(self, tensor)
    out = new((), dtype)
    _gemm("aten::dot", out.view(1, 1), self.unsqueeze(0), tensor.unsqueeze(1))
    return out


@op("dot.out", kernels="gemm")
def dot_out(self, tensor, *, out):
    dtype = require_float("dot", self, tensor)
    _dot_check(self, tensor)
    fit_out(out, (), dtype, "dot")
    _gemm("aten::dot", out.view(1, 1), self.unsqueeze(0), tensor.unsqueeze(1))
    return out


def addbmm_host(self, batch1, batch2, *, beta=1, alpha=1):
    """addbmm_ on the host aliases, refusing a `self` of another shape than the result: the
    CPU kernel resizes it (a legacy quirk against the in-place rule of the docs), which on an
    alias of HBM would write past the tensor's block."""
    want = [batch1.shape[1], batch2.shape[2]] if batch1.dim() == 3 and batch2.dim() == 3 \
        else None
    if want is not None and list(self.shape) != want:
        raise RuntimeError(f"output with shape {list(self.shape)} doesn't match the broadcast "
                           f"shape {want}")
    return torch.ops.aten.addbmm_(self, batch1, batch2, beta=beta, alpha=alpha)


reference_only("addbmm_", host=addbmm_host, group="linalg")
reference_only(*(n for n in cpu_overloads("vdot", "addbmm", "addr", "_addmm_activation")
                 if n not in _DONE and n != "addbmm_"), group="linalg")

# torch.cdist (pairwise distances) on the host, as the rest of this list.
reference_rest(*cpu_overloads("_cdist_forward", "_cdist_backward"), group="linalg")

# Integer and scaled (fp8) matmuls as torchao and friends call them: PyTorch's CPU kernels.
reference_rest(*cpu_overloads("_int_mm", "_scaled_mm", "_scaled_mm_v2"), group="linalg")
