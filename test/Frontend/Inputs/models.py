"""Small decoders in plain PyTorch for the frontend tests, with sizes that
all differ (a wrong transpose cannot hide behind equal dimensions).

Attention calls F.scaled_dot_product_attention when torch has it (2.x, and
during dc_torch export, which puts dc's own there) and its own math
otherwise (torch 1.13, the CI's): both are causal with grouped K/V heads."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB = 13


def causal_attention(q, k, v):
    sdpa = getattr(F, "scaled_dot_product_attention", None)
    if sdpa is not None:
        if k.shape[1] != q.shape[1]:  # GQA: torch 2.x's needs enable_gqa
            return sdpa(q, k, v, is_causal=True, enable_gqa=True)
        return sdpa(q, k, v, is_causal=True)
    groups = q.shape[1] // k.shape[1]
    b, h, s, d = k.shape
    k = k[:, :, None].expand(b, h, groups, s, d).reshape(b, h * groups, s, d)
    v = v[:, :, None].expand(b, h, groups, s, d).reshape(b, h * groups, s, d)
    scores = q @ k.transpose(-1, -2) / math.sqrt(d)
    mask = torch.ones(s, s, dtype=torch.bool).triu(1)
    return scores.masked_fill(mask, float("-inf")).softmax(-1) @ v


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        x32 = x.float()
        r = torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return (x32 * r).to(x.dtype) * self.weight


def rotate(x, inv=None, base=10000.0):
    """Rotary embedding of [B, H, S, Dh]; the tables are computed here from
    the inverse frequencies `inv` (computed too when not given), so the
    exported step recomputes them instead of storing them."""
    s, d = x.shape[-2], x.shape[-1]
    if inv is None:
        inv = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    angles = torch.arange(s, dtype=torch.float32)[:, None] * inv[None, :]
    cos = torch.cat([angles.cos(), angles.cos()], -1).to(x.dtype)
    sin = torch.cat([angles.sin(), angles.sin()], -1).to(x.dtype)
    half = torch.cat([-x[..., d // 2:], x[..., :d // 2]], -1)
    return x * cos + half * sin


class LlamaBlock(nn.Module):
    """Embedding, one pre-norm block (RMSNorm, rotary, GQA with 4 query and
    2 K/V heads, SwiGLU), final RMSNorm, untied LM head."""

    def __init__(self, dim=16, heads=4, kv_heads=2, ffn=20, vocab=VOCAB):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.embed = nn.Embedding(vocab, dim)
        self.attn_norm = RMSNorm(dim)
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        self.mlp_norm = RMSNorm(dim)
        self.gate = nn.Linear(dim, ffn, bias=False)
        self.up = nn.Linear(dim, ffn, bias=False)
        self.down = nn.Linear(ffn, dim, bias=False)
        self.norm = RMSNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens):
        b, s = tokens.shape
        x = self.embed(tokens)
        a = self.attn_norm(x)
        split = lambda t, h: t.view(b, s, h, self.head_dim).transpose(1, 2)
        q = rotate(split(self.wq(a), self.heads))
        k = rotate(split(self.wk(a), self.kv_heads))
        v = split(self.wv(a), self.kv_heads)
        o = causal_attention(q, k, v).transpose(1, 2).reshape(b, s, -1)
        x = x + self.wo(o)
        m = self.mlp_norm(x)
        x = x + self.down(F.silu(self.gate(m)) * self.up(m))
        return self.lm_head(self.norm(x))


class GPT2Block(nn.Module):
    """Token and position embeddings, one block (LayerNorm, fused QKV with
    biases, tanh GELU MLP), final LayerNorm, LM head tied to the token
    embedding (Hugging Face style: one Parameter under two names)."""

    def __init__(self, dim=12, heads=3, seq=7, vocab=VOCAB):
        super().__init__()
        self.heads = heads
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(seq, dim)
        self.ln_1 = nn.LayerNorm(dim)
        self.c_attn = nn.Linear(dim, 3 * dim)
        self.c_proj = nn.Linear(dim, dim)
        self.ln_2 = nn.LayerNorm(dim)
        self.c_fc = nn.Linear(dim, 4 * dim)
        self.mlp_proj = nn.Linear(4 * dim, dim)
        self.ln_f = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, tokens):
        b, s = tokens.shape
        x = self.wte(tokens) + self.wpe(torch.arange(s))
        q, k, v = self.c_attn(self.ln_1(x)).split(x.shape[-1], dim=-1)
        heads = lambda t: t.view(b, s, self.heads, -1).transpose(1, 2)
        o = causal_attention(heads(q), heads(k), heads(v))
        x = x + self.c_proj(o.transpose(1, 2).reshape(b, s, -1))
        h = F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh")
        x = x + self.mlp_proj(h)
        return self.lm_head(self.ln_f(x))


class LlamaBuffered(LlamaBlock):
    """The Llama block with Hugging Face's layout of the rotary frequencies:
    a buffer (not trained), which export makes a #dc.param without a
    gradient, loaded from the weights file like the parameters."""

    def __init__(self):
        super().__init__()
        d = self.head_dim
        inv = 1.0 / (10000.0 ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
        self.register_buffer("inv_freq", inv)

    def forward(self, tokens):
        global rotate
        plain = rotate
        rotate = lambda x: plain(x, self.inv_freq)
        try:
            return super().forward(tokens)
        finally:
            rotate = plain


def llama():
    return LlamaBlock()


def llama_buffered():
    return LlamaBuffered()


def gpt2():
    return GPT2Block()


class BranchOnPositions(nn.Module):
    """Python control flow on a value computed from torch.arange alone, as
    Hugging Face's mask helpers branch on position ids: the same in every
    step, so the export reads it once and keeps the branch taken."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(13, 16)
        self.head = nn.Linear(16, 13)

    def forward(self, tokens):
        positions = torch.arange(tokens.shape[1])
        x = self.embed(tokens)
        if (torch.diff(positions) == 1).all():
            x = x * 2
        return self.head(x)


branch_on_positions = BranchOnPositions
