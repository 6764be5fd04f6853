"""A TorchTitan-style llama debug model (a few small layers) and its parallelisms.

The layout follows TorchTitan's llama: token embedding, pre-norm transformer blocks (RMSNorm,
attention with rotary position embeddings and grouped KV heads, SwiGLU feed-forward), a final
norm and an output projection. The rotary embedding is the real-valued (rotate-half) form.
`apply_fsdp` shards every block and then the root with FSDP2, as TorchTitan does;
`apply_tp` is TorchTitan's tensor-parallel plan (column-wise q/k/v and w1/w3, row-wise o and
w2). Attention derives its local head count from the projection's width, so it runs on
tensor-parallel shards unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class LlamaConfig:
    """TorchTitan's debug model is 6 layers of dim 256; these defaults are smaller still."""

    dim: int = 64
    n_layers: int = 2
    n_heads: int = 4
    n_kv_heads: int = 2
    vocab_size: int = 256
    multiple_of: int = 32
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    max_seq_len: int = 64

    @staticmethod
    def torchtitan_debug() -> LlamaConfig:
        """The sizes of TorchTitan's llama3 "debugmodel" flavor (dim 256, 6 layers, 16 heads,
        a 2,000-token vocabulary)."""
        return LlamaConfig(dim=256, n_layers=6, n_heads=16, n_kv_heads=16, vocab_size=2000,
                           multiple_of=256, rope_theta=500000.0, max_seq_len=2048)

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

    @property
    def ffn_dim(self) -> int:
        hidden = int(2 * 4 * self.dim / 3)
        return self.multiple_of * ((hidden + self.multiple_of - 1) // self.multiple_of)


def rope_tables(cfg: LlamaConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the rotary angles, (max_seq_len, head_dim)."""
    half = cfg.head_dim // 2
    freqs = 1.0 / (cfg.rope_theta ** (torch.arange(0, half, dtype=torch.float32) / half))
    angles = torch.outer(torch.arange(cfg.max_seq_len, dtype=torch.float32), freqs)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


class Attention(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.head_dim = cfg.head_dim
        self.rep = cfg.n_heads // cfg.n_kv_heads
        self.wq = nn.Linear(cfg.dim, cfg.n_heads * cfg.head_dim, bias=False)
        self.wk = nn.Linear(cfg.dim, cfg.n_kv_heads * cfg.head_dim, bias=False)
        self.wv = nn.Linear(cfg.dim, cfg.n_kv_heads * cfg.head_dim, bias=False)
        self.wo = nn.Linear(cfg.n_heads * cfg.head_dim, cfg.dim, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q = self.wq(x).view(b, s, -1, self.head_dim)  # local heads under tensor parallelism
        k = self.wk(x).view(b, s, -1, self.head_dim)
        v = self.wv(x).view(b, s, -1, self.head_dim)
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        k = k.repeat_interleave(self.rep, dim=2)
        v = v.repeat_interleave(self.rep, dim=2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(out.transpose(1, 2).reshape(b, s, -1))


class FeedForward(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.w1 = nn.Linear(cfg.dim, cfg.ffn_dim, bias=False)
        self.w2 = nn.Linear(cfg.ffn_dim, cfg.dim, bias=False)
        self.w3 = nn.Linear(cfg.dim, cfg.ffn_dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.attention_norm = nn.RMSNorm(cfg.dim, eps=cfg.norm_eps)
        self.attention = Attention(cfg)
        self.ffn_norm = nn.RMSNorm(cfg.dim, eps=cfg.norm_eps)
        self.feed_forward = FeedForward(cfg)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x), cos, sin)
        return x + self.feed_forward(self.ffn_norm(x))


class Llama(nn.Module):
    """tokens (batch, seq) -> logits (batch, seq, vocab)."""

    def __init__(self, cfg: LlamaConfig | None = None):
        super().__init__()
        self.cfg = cfg = cfg or LlamaConfig()
        self.tok_embeddings = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.layers = nn.ModuleDict({str(i): TransformerBlock(cfg) for i in range(cfg.n_layers)})
        self.norm = nn.RMSNorm(cfg.dim, eps=cfg.norm_eps)
        self.output = nn.Linear(cfg.dim, cfg.vocab_size, bias=False)
        cos, sin = rope_tables(cfg)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        s = tokens.shape[1]
        cos, sin = self.rope_cos[:s, None, :], self.rope_sin[:s, None, :]
        h = self.tok_embeddings(tokens)
        for layer in self.layers.values():
            h = layer(h, cos, sin)
        return self.output(self.norm(h))


def loss_fn(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


def apply_fsdp(model: Llama, mesh: Any, reshard_after_forward: bool = True) -> Llama:
    """FSDP2 as TorchTitan applies it: each block, then the root."""
    from torch.distributed.fsdp import fully_shard

    for layer in model.layers.values():
        fully_shard(layer, mesh=mesh, reshard_after_forward=reshard_after_forward)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard_after_forward)
    return model


def apply_tp(model: Llama, mesh: Any) -> Llama:
    """TorchTitan's tensor-parallel plan for each block (heads must divide by the mesh)."""
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    plan = {"attention.wq": ColwiseParallel(), "attention.wk": ColwiseParallel(),
            "attention.wv": ColwiseParallel(), "attention.wo": RowwiseParallel(),
            "feed_forward.w1": ColwiseParallel(), "feed_forward.w2": RowwiseParallel(),
            "feed_forward.w3": ColwiseParallel()}
    for layer in model.layers.values():
        parallelize_module(layer, mesh, plan)
    return model


def batch(cfg: LlamaConfig, step: int, batch_size: int, seq: int, rank: int = 0,
          seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A deterministic batch for (step, rank): tokens and next-token targets."""
    g = torch.Generator().manual_seed(seed + 1000 * step + rank)
    tok = torch.randint(0, cfg.vocab_size, (batch_size, seq + 1), generator=g)
    return tok[:, :-1].contiguous(), tok[:, 1:].contiguous()
