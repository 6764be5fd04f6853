"""Small models for the torch.compile tests: one per fusion pattern, each written the way
models usually spell it, plus a block that holds several."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class LinearAct(nn.Module):
    """act(linear(x)) thrice: gelu with a bias, silu without, tanh of a 2-D input."""

    def __init__(self, d: int = 32, h: int = 48):
        super().__init__()
        self.fc1 = nn.Linear(d, h)
        self.fc2 = nn.Linear(d, h, bias=False)
        self.fc3 = nn.Linear(h, h)

    def forward(self, x):
        y = F.gelu(self.fc1(x)) * F.silu(self.fc2(x))
        return torch.tanh(self.fc3(y.flatten(0, -2))) + y.flatten(0, -2)


class GeluMLP(nn.Module):
    def __init__(self, d: int = 32, h: int = 64):
        super().__init__()
        self.fc = nn.Linear(d, h)
        self.proj = nn.Linear(h, d)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))


class SwiGLU(nn.Module):
    def __init__(self, d: int = 32, h: int = 64):
        super().__init__()
        self.w1 = nn.Linear(d, h, bias=False)
        self.w3 = nn.Linear(d, h, bias=False)
        self.w2 = nn.Linear(h, d, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Attention(nn.Module):
    """nanoGPT-style causal attention written out (masked_fill with a buffer mask)."""

    def __init__(self, d: int = 32, heads: int = 4, seq: int = 16, additive: bool = False):
        super().__init__()
        self.heads, self.additive = heads, additive
        self.qkv = nn.Linear(d, 3 * d)
        causal = torch.tril(torch.ones(seq, seq)).view(1, 1, seq, seq)
        self.register_buffer("mask", causal)
        self.register_buffer("bias", torch.zeros(1, 1, seq, seq).masked_fill(causal == 0, -1e4))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        if self.additive:
            att = att + self.bias[:, :, :t, :t]
        else:
            att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        return (att @ v).transpose(1, 2).reshape(b, t, d)


class ManualRMSNorm(nn.Module):
    def __init__(self, d: int = 32, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class AddNorm(nn.Module):
    """Residual adds before an RMSNorm and a LayerNorm, the sums used further."""

    def __init__(self, d: int = 32):
        super().__init__()
        self.lin = nn.Linear(d, d)
        self.rms = nn.RMSNorm(d, eps=1e-5)
        self.ln = nn.LayerNorm(d)

    def forward(self, x):
        x = x + self.lin(x)
        h = self.rms(x)
        x = x + torch.tanh(h)
        return self.ln(x) * 2 + x


class Classifier(nn.Module):
    """logits then cross-entropy (with label smoothing), and nll_loss of log_softmax."""

    def __init__(self, d: int = 32, classes: int = 40):
        super().__init__()
        self.head = nn.Linear(d, classes)

    def forward(self, x, y):
        logits = self.head(x)
        a = F.cross_entropy(logits, y, label_smoothing=0.1)
        return a + F.nll_loss(F.log_softmax(logits * 0.5, dim=-1), y, reduction="sum") / 64


class FusableBlock(nn.Module):
    """A pre-norm decoder block written out: every pattern but cross-entropy."""

    def __init__(self, d: int = 32, heads: int = 4, seq: int = 16, hidden: int = 64):
        super().__init__()
        self.n1 = ManualRMSNorm(d)
        self.attn = Attention(d, heads, seq)
        self.proj = nn.Linear(d, d)
        self.n2 = nn.RMSNorm(d, eps=1e-5)
        self.mlp = SwiGLU(d, hidden)

    def forward(self, x):
        x = x + self.proj(self.attn(self.n1(x)))
        return x + self.mlp(self.n2(x))
