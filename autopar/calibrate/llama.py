"""A Llama-style decoder in plain eager PyTorch, built from a ModelSpec.

Names follow torchtitan's Llama (tok_embeddings, layers.N.attention.wq ...,
feed_forward.w1/w2/w3, attention_norm, ffn_norm, norm, output) so that the
tensor-parallel plan reads like theirs. Layers live in a ModuleDict keyed by
their global index: a pipeline stage deletes the ones it does not own and
keeps the names. Rotary tables are buffers (not activations, not parameters).

Every op is plain eager PyTorch (RMSNorm written out, SDPA for attention), so
what it saves for backward is the same on CPU and GPU and is what
cost/habits.py's EAGER_TORCH counts.
"""

from __future__ import annotations

from typing import Any, cast

import torch
import torch.distributed._functional_collectives as funcol
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (xf * rstd).type_as(x) * self.weight


def rotary_tables(seq_len: int, head_dim: int, theta: float = 500000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of shape (seq_len, head_dim), halves repeated (the rotate-half convention)."""
    inv = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = torch.outer(torch.arange(seq_len, dtype=torch.float32), inv)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


class Attention(nn.Module):
    def __init__(self, *, hidden: int, heads: int, kv_heads: int, head_dim: int) -> None:
        super().__init__()
        self.head_dim = head_dim
        self.wq = nn.Linear(hidden, heads * head_dim, bias=False)
        self.wk = nn.Linear(hidden, kv_heads * head_dim, bias=False)
        self.wv = nn.Linear(hidden, kv_heads * head_dim, bias=False)
        self.wo = nn.Linear(heads * head_dim, hidden, bias=False)
        self.cp_group: Any = None  # context parallel: gather K and V over this group (all-gather form)
        self.cp_mask: torch.Tensor | None = None  # additive causal mask, local queries x gathered keys

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        d = self.head_dim
        q = self.wq(x).view(b, s, -1, d).transpose(1, 2)  # local heads under TP
        k = self.wk(x).view(b, s, -1, d).transpose(1, 2)
        v = self.wv(x).view(b, s, -1, d).transpose(1, 2)
        c, sn = cos[:s].to(q.dtype), sin[:s].to(q.dtype)
        q, k = _rotate(q, c, sn), _rotate(k, c, sn)
        gqa = q.shape[1] != k.shape[1]
        if self.cp_group is not None:
            k = funcol.all_gather_tensor_autograd(k.contiguous(), gather_dim=2, group=self.cp_group)
            v = funcol.all_gather_tensor_autograd(v.contiguous(), gather_dim=2, group=self.cp_group)
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=self.cp_mask, enable_gqa=gqa)
        else:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
        return self.wo(out.transpose(1, 2).reshape(b, s, -1))


class FeedForward(nn.Module):
    def __init__(self, *, hidden: int, ffn: int, activation: str) -> None:
        super().__init__()
        self.activation = activation
        self.w1 = nn.Linear(hidden, ffn, bias=False)
        self.w2 = nn.Linear(ffn, hidden, bias=False)
        self.w3 = nn.Linear(hidden, ffn, bias=False) if activation == "swiglu" else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.w3 is not None:
            return self.w2(F.silu(self.w1(x)) * self.w3(x))
        if self.activation == "relu2":
            return self.w2(F.relu(self.w1(x)).square())
        return self.w2(F.gelu(self.w1(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, *, hidden: int, heads: int, kv_heads: int, head_dim: int, ffn: int, activation: str) -> None:
        super().__init__()
        self.attention_norm = RMSNorm(hidden)
        self.attention = Attention(hidden=hidden, heads=heads, kv_heads=kv_heads, head_dim=head_dim)
        self.ffn_norm = RMSNorm(hidden)
        self.feed_forward = FeedForward(hidden=hidden, ffn=ffn, activation=activation)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        h = x + self.attention(self.attention_norm(x), cos, sin)
        return h + self.feed_forward(self.ffn_norm(h))


class Llama(nn.Module):
    """Embedding, blocks, final norm, output; any of the three may be None on a pipeline stage."""

    def __init__(
        self,
        *,
        layers: int,
        hidden: int,
        heads: int,
        kv_heads: int,
        head_dim: int,
        ffn: int,
        activation: str,
        vocab: int,
        seq_len: int,
        rope_dtype: torch.dtype = torch.bfloat16,
    ) -> None:
        super().__init__()
        self.tok_embeddings: nn.Embedding | None = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleDict(
            {
                str(i): Block(hidden=hidden, heads=heads, kv_heads=kv_heads, head_dim=head_dim, ffn=ffn, activation=activation)
                for i in range(layers)
            }
        )
        self.norm: RMSNorm | None = RMSNorm(hidden)
        self.output: nn.Linear | None = nn.Linear(hidden, vocab, bias=False)
        cos, sin = rotary_tables(seq_len, head_dim)
        self.register_buffer("cos", cos.to(rope_dtype), persistent=False)  # in the compute dtype: no per-call cast
        self.register_buffer("sin", sin.to(rope_dtype), persistent=False)

    def enable_context_parallel(self, group: Any, positions: torch.Tensor, gathered: torch.Tensor) -> None:
        """Attend with K and V gathered over `group`: rotary tables at this rank's `positions`, and the
        causal mask of those queries against the keys at `gathered` positions (the all-gather order)."""
        cos, sin = cast(torch.Tensor, self.cos), cast(torch.Tensor, self.sin)
        self.register_buffer("cos", cos[positions].contiguous(), persistent=False)
        self.register_buffer("sin", sin[positions].contiguous(), persistent=False)
        allowed = gathered[None, :] <= positions[:, None]
        mask = torch.zeros(allowed.shape, dtype=cos.dtype, device=cos.device).masked_fill(~allowed, float("-inf"))
        self.register_buffer("cp_mask", mask, persistent=False)  # a buffer: not counted as an activation
        for block in self.layers.values():
            attention = cast(Block, block).attention
            attention.cp_group, attention.cp_mask = group, mask

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.tok_embeddings(x) if self.tok_embeddings is not None else x
        cos, sin = cast(torch.Tensor, self.cos), cast(torch.Tensor, self.sin)
        for block in self.layers.values():
            h = block(h, cos, sin)
        if self.norm is not None:
            h = self.norm(h)
        return self.output(h) if self.output is not None else h
