"""Families the device serves on the host (reference only: PyTorch's CPU kernel over the
device's bytes, counted by torch.trn.host_ops()), run from PyTorch's own OpInfo samples on
device tensors against the CPU: outputs, and the float32 gradient of the first sample."""

from __future__ import annotations

import pytest
import torch
from opinfo_harness import run_op

NAMES = [
    "nn.functional.logsigmoid", "nn.functional.pad", "nn.functional.pixel_shuffle",
    "nn.functional.pixel_unshuffle", "nn.functional.channel_shuffle",
    "nn.functional.interpolate", "nn.functional.grid_sample", "nn.functional.avg_pool3d",
    "nn.functional.max_pool3d", "nn.functional.adaptive_avg_pool3d",
    "nn.functional.adaptive_max_pool3d", "nn.functional.ctc_loss", "nn.functional.hardshrink",
    "nn.functional.softshrink", "nn.functional.multi_margin_loss",
    "nn.functional.multilabel_margin_loss", "nn.functional.pdist", "cdist", "logaddexp",
    "logaddexp2", "lgamma", "digamma", "polygamma", "mvlgamma", "i0", "sinc", "heaviside",
    "igamma", "igammac", "gcd", "lcm", "nextafter", "special.entr", "special.erfcx",
    "special.i0e", "special.i1", "special.i1e", "special.log_ndtr", "special.ndtri",
    "special.xlog1py",
    # linalg_solvers.py: factorizations and solves (LAPACK on the host)
    "linalg.inv", "linalg.inv_ex", "linalg.det", "linalg.slogdet", "linalg.svd",
    "linalg.svdvals", "linalg.eigh", "linalg.eigvalsh", "linalg.eig", "linalg.eigvals",
    "linalg.qr", "linalg.cholesky", "linalg.cholesky_ex", "cholesky_inverse", "cholesky_solve",
    "linalg.solve", "linalg.solve_ex", "linalg.lu", "linalg.lu_factor", "linalg.lu_solve",
    "lu_unpack", "linalg.solve_triangular", "triangular_solve", "linalg.lstsq",
    "linalg.ldl_factor", "linalg.ldl_solve", "linalg.householder_product", "geqrf", "ormqr",
    "linalg.cross", "cross", "renorm", "linalg.pinv", "linalg.matrix_rank", "linalg.cond",
    # spectral.py: torch.fft and stft
    "fft.fft", "fft.ifft", "fft.rfft", "fft.irfft", "fft.fft2", "fft.rfftn", "fft.hfft",
    "fft.ihfft", "stft",
]


@pytest.mark.parametrize("name", NAMES)
def test_reference_family_matches_cpu(name):
    out = run_op(name, torch.float32, 3, 1)
    assert out.samples, f"no OpInfo samples for {name}"
    assert not out.failures, "\n".join(out.failures)


def test_weight_norm_trains_as_on_the_cpu(dev, kernel_mode):
    """nn.utils.weight_norm (audio models' convolutions) through _weight_norm_interface."""
    torch.manual_seed(0)
    conv = torch.nn.utils.parametrizations.weight_norm(torch.nn.Conv1d(3, 4, 3))
    conv_d = torch.nn.utils.parametrizations.weight_norm(torch.nn.Conv1d(3, 4, 3))
    conv_d.load_state_dict(conv.state_dict())
    conv_d.to(dev)
    x = torch.randn(2, 3, 9)
    conv(x).square().sum().backward()
    conv_d(x.to(dev)).square().sum().backward()
    for (name, p), pd in zip(conv.named_parameters(), conv_d.parameters(), strict=True):
        torch.testing.assert_close(pd.grad.cpu(), p.grad, rtol=1e-5, atol=1e-5, msg=name)
    ran = getattr(torch, dev).host_ops()
    assert any(k.startswith("aten::_weight_norm_interface") for k in ran), ran


def test_orthogonal_init_and_a_solve_on_device_parameters(dev, kernel_mode):
    """nn.init.orthogonal_ (QR) initializes a device weight as it does a CPU one."""
    w = torch.empty(64, 32)
    wd = torch.empty(64, 32, device=dev)
    torch.manual_seed(3)
    torch.nn.init.orthogonal_(w)
    torch.manual_seed(3)
    torch.nn.init.orthogonal_(wd)
    torch.testing.assert_close(wd.cpu(), w, rtol=1e-5, atol=1e-5)
    eye = (wd.t() @ wd).cpu()
    torch.testing.assert_close(eye, torch.eye(32), rtol=0, atol=1e-5)
    a = torch.randn(8, 8) + 8 * torch.eye(8)
    b = torch.randn(8, 3)
    torch.testing.assert_close(torch.linalg.solve(a.to(dev), b.to(dev)).cpu(),
                               torch.linalg.solve(a, b), rtol=1e-5, atol=1e-6)


def test_quantization_aware_training_fake_quant_on_the_device(dev, kernel_mode):
    """torch.ao's fused observer + fake quant (the default QAT qconfig's) keeps its running
    statistics on the device and matches the CPU; the plain FakeQuantize's scale comes from
    the device's division (x * reciprocal(y), as on the hardware), within an ulp, so its
    values agree to one quantum."""
    from torch.ao.quantization import FakeQuantize, FusedMovingAvgObsFakeQuantize

    torch.manual_seed(0)
    for cls in (FusedMovingAvgObsFakeQuantize, FakeQuantize):
        fq, fqd = cls(), cls().to(dev)
        a = torch.randn(4, 8, requires_grad=True)
        ad = a.detach().to(dev).requires_grad_()
        for _ in range(2):
            y, yd = fq(a), fqd(ad)
        y.sum().backward()
        yd.sum().backward()
        tol = 0 if cls is FusedMovingAvgObsFakeQuantize else float(fq.scale)
        torch.testing.assert_close(yd.cpu(), y, rtol=0, atol=tol)
        torch.testing.assert_close(fqd.scale.cpu(), fq.scale, rtol=2e-7, atol=0)
        assert torch.equal(ad.grad.cpu(), a.grad)


def test_factories_that_take_a_device_and_async_asserts(dev, kernel_mode):
    """Factories served by the host get device= mapped (tril_indices recursed before);
    kaiser_window's CPU kernel fills through a DispatchStub no Python device can register."""
    assert torch.equal(torch.tril_indices(4, 3, 1, device=dev).cpu(), torch.tril_indices(4, 3, 1))
    assert torch.equal(torch.triu_indices(4, 3, device=dev, dtype=torch.int32).cpu(),
                       torch.triu_indices(4, 3, dtype=torch.int32))
    torch.testing.assert_close(torch.kaiser_window(8, device=dev).cpu(), torch.kaiser_window(8))
    x = torch.ones(3, device=dev)
    torch._assert_async(x.sum() > 0)
    with pytest.raises(RuntimeError, match="nonzero"):
        torch._assert_async(x.sum() < 0)
