"""The fused optimizer steps torch.optim calls with fused=True: one launch of
trnsim.kernels.optim per step over every parameter. Step counts (tensors on the device) are
read on the host, as PyTorch's fused CPU kernel reads them; AMP's grad_scale / found_inf and
tensor learning rates run on the host."""

from __future__ import annotations

import torch
from trnsim.backend.ops._common import launch
from trnsim.backend.registry import HostOnly, cpu_overloads, op, reference_only, reference_rest
from trnsim.backend.runtime import runtime
from trnsim.kernels import optim

_DTYPES = (torch.float32, torch.bfloat16)


def _check(params, *lists, grad_scale=None, found_inf=None) -> None:
    if grad_scale is not None or found_inf is not None:
        raise HostOnly("grad_scale / found_inf (AMP gradient scaling)")
    for lst in (params, *lists):
        for t in lst:
            if t.dtype not in _DTYPES:
                raise HostOnly(f"{t.dtype} optimizer state")


def _adam(name, decoupled, self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps,
          *, lr, beta1, beta2, weight_decay, eps, amsgrad, maximize, grad_scale=None,
          found_inf=None):
    if isinstance(lr, torch.Tensor):
        raise HostOnly("a tensor learning rate")
    _check(self, grads, exp_avgs, exp_avg_sqs, grad_scale=grad_scale, found_inf=found_inf)
    if not self:
        return
    views = runtime().host_views
    steps = [int(views.of(s).item()) if s.device.type != "cpu" else int(s.item())
             for s in state_steps]
    launch(optim.adam, list(self), list(grads), list(exp_avgs), list(exp_avg_sqs),
           list(max_exp_avg_sqs) if amsgrad else None, aten_op=f"aten::{name}",
           names=("params", "grads", "exp_avgs", "exp_avg_sqs", "max_exp_avg_sqs"),
           steps=steps, lr=float(lr), beta1=float(beta1), beta2=float(beta2), eps=float(eps),
           weight_decay=float(weight_decay), amsgrad=bool(amsgrad), maximize=bool(maximize),
           decoupled_weight_decay=decoupled)


op("_fused_adam_", kernels="adam")(lambda *a, **k: _adam("_fused_adam_", False, *a, **k))
op("_fused_adamw_", kernels="adam")(lambda *a, **k: _adam("_fused_adamw_", True, *a, **k))


@op("_fused_sgd_", kernels="sgd")
def fused_sgd_(self, grads, momentum_buffer_list, *, weight_decay, momentum, lr, dampening,
               nesterov, maximize, is_first_step, grad_scale=None, found_inf=None):
    if isinstance(lr, torch.Tensor):
        raise HostOnly("a tensor learning rate")
    _check(self, grads, momentum_buffer_list, grad_scale=grad_scale, found_inf=found_inf)
    if not self:
        return
    bufs = list(momentum_buffer_list) if momentum != 0 and momentum_buffer_list else None
    launch(optim.sgd, list(self), list(grads), bufs, aten_op="aten::_fused_sgd_",
           names=("params", "grads", "momentum_bufs"), lr=float(lr), momentum=float(momentum),
           dampening=float(dampening), weight_decay=float(weight_decay),
           nesterov=bool(nesterov), maximize=bool(maximize), first_step=bool(is_first_step))


reference_rest(*cpu_overloads("_fused_adam", "_fused_adamw", "_fused_sgd", "_fused_adagrad"),
               group="optim")
# torch.amp.GradScaler's two steps (unscale the gradients and flag inf/NaN, then grow or back
# off the scale): a few scalars per step, on the host.
reference_only(*cpu_overloads("_amp_foreach_non_finite_check_and_unscale", "_amp_update_scale"),
               group="optim", note="torch.amp.GradScaler")
