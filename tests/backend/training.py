"""Training runs shared by the tests and examples: the same model, data and optimizer on the
CPU and on the device, step by step."""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
import torch.nn.functional as F
from trnsim.backend.models import MLP, CNNBlock, TinyTransformer

OPTIMIZERS: dict[str, Callable] = {
    "sgd": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9),
    "adamw": lambda p: torch.optim.AdamW(p, lr=3e-3, weight_decay=0.01),
    "adamw_fused": lambda p: torch.optim.AdamW(p, lr=3e-3, weight_decay=0.01, fused=True),
    "adam_foreach": lambda p: torch.optim.Adam(p, lr=3e-3, foreach=True),
}


def workload(name: str, seed: int = 0):
    """(model, batch, loss_fn) of one of the test workloads, on the CPU."""
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    if name == "mlp":
        model = MLP()
        batch = (torch.randn(32, 32, generator=g), torch.randint(0, 10, (32,), generator=g))
        return model, batch, lambda m, x, y: F.cross_entropy(m(x), y)
    if name == "cnn":
        model = CNNBlock()
        batch = (torch.randn(4, 3, 8, 8, generator=g), torch.randint(0, 10, (4,), generator=g))
        return model, batch, lambda m, x, y: F.cross_entropy(m(x), y)
    if name == "transformer":
        model = TinyTransformer()
        tokens = torch.randint(0, 64, (2, 16), generator=g)
        return model, (tokens, torch.roll(tokens, -1, 1)), lambda m, x, y: m(x, y)
    raise ValueError(name)


def train(model, batch, loss_fn, optimizer: str, steps: int, device: str,
          autocast: bool = False) -> tuple[list[float], dict[str, torch.Tensor]]:
    """Losses of `steps` steps and the final parameters (on the CPU)."""
    model = copy.deepcopy(model).to(device)
    opt = OPTIMIZERS[optimizer](model.parameters())
    data = [t.to(device) for t in batch]
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=autocast):
            loss = loss_fn(model, *data)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, {k: v.detach().cpu() for k, v in model.state_dict().items()}
