"""A Llama-style decoder in plain PyTorch (RMSNorm, rotary, grouped-query
attention, SwiGLU) of any depth, for `python3 -m dc_torch export`:

  python3 -m dc_torch export llama:small --batch 1 --seq 64 -o step.mlir \\
      --weights init.safetensors        # run from examples/torch
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        r = torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return (x.float() * r).to(x.dtype) * self.weight


def rotate(x, base=10000.0):
    s, d = x.shape[-2], x.shape[-1]
    inv = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    angles = torch.arange(s, dtype=torch.float32)[:, None] * inv[None, :]
    cos = torch.cat([angles.cos(), angles.cos()], -1).to(x.dtype)
    sin = torch.cat([angles.sin(), angles.sin()], -1).to(x.dtype)
    return x * cos + torch.cat([-x[..., d // 2:], x[..., :d // 2]], -1) * sin


def attention(q, k, v):
    # dc_torch export provides F.scaled_dot_product_attention on any torch.
    if k.shape[1] != q.shape[1]:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                              enable_gqa=True)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


class Block(nn.Module):
    def __init__(self, dim, heads, kv_heads, ffn):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.attn_norm = RMSNorm(dim)
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        self.mlp_norm = RMSNorm(dim)
        self.gate = nn.Linear(dim, ffn, bias=False)
        self.up = nn.Linear(dim, ffn, bias=False)
        self.down = nn.Linear(ffn, dim, bias=False)

    def forward(self, x):
        b, s, _ = x.shape
        a = self.attn_norm(x)
        split = lambda t, h: t.view(b, s, h, self.head_dim).transpose(1, 2)
        q = rotate(split(self.wq(a), self.heads))
        k = rotate(split(self.wk(a), self.kv_heads))
        v = split(self.wv(a), self.kv_heads)
        x = x + self.wo(attention(q, k, v).transpose(1, 2).reshape(b, s, -1))
        m = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(m)) * self.up(m))


class Llama(nn.Module):
    def __init__(self, layers, dim, heads, kv_heads, ffn, vocab):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(
            Block(dim, heads, kv_heads, ffn) for _ in range(layers))
        self.norm = RMSNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens):
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.norm(x))


def small():
    """2 layers, 2.2M parameters."""
    return Llama(layers=2, dim=256, heads=8, kv_heads=4, ffn=688, vocab=1000)


def deep32():
    """32 layers of the small model's width: 25.4M parameters, the depth of
    a 7B Llama (export time grows with the number of ops, not their size)."""
    return Llama(layers=32, dim=256, heads=8, kv_heads=4, ffn=688, vocab=1000)
