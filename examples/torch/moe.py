"""A mixture-of-experts decoder in plain PyTorch, its MoE layer written the
way hand-written ones usually are (mistral-inference style: top-k of the
gate's logits, a softmax over those k, a loop over the experts picking their
tokens with torch.where), for `python3 -m dc_torch export`:

  python3 -m dc_torch export moe:small --batch 1 --seq 64 -o step.mlir \\
      --weights init.safetensors        # run from examples/torch

The loop's shapes depend on the routing, so dc_torch exports the layer in
its static-shape form (grouped matmuls over the tokens sorted by expert;
docs/frontend.md, 'Mixture of experts'), checked against this forward on
the export's tokens."""

import torch
import torch.nn as nn
import torch.nn.functional as F

from llama import RMSNorm, attention, rotate


class FeedForward(nn.Module):
    """One expert: SwiGLU."""

    def __init__(self, dim, ffn):
        super().__init__()
        self.w1 = nn.Linear(dim, ffn, bias=False)
        self.w2 = nn.Linear(ffn, dim, bias=False)
        self.w3 = nn.Linear(dim, ffn, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class MoE(nn.Module):
    def __init__(self, dim, ffn, experts=8, top_k=2):
        super().__init__()
        self.top_k = top_k
        self.gate = nn.Linear(dim, experts, bias=False)
        self.experts = nn.ModuleList(FeedForward(dim, ffn)
                                     for _ in range(experts))

    def forward(self, x):
        flat = x.reshape(-1, x.shape[-1])
        logits = self.gate(flat)
        weights, chosen = torch.topk(logits, self.top_k, dim=-1)
        weights = F.softmax(weights, dim=-1, dtype=torch.float32).to(x.dtype)
        out = torch.zeros_like(flat)
        for i, expert in enumerate(self.experts):
            token, slot = torch.where(chosen == i)
            out[token] += weights[token, slot, None] * expert(flat[token])
        return out.reshape(x.shape)


class Block(nn.Module):
    def __init__(self, dim, heads, kv_heads, ffn, experts, top_k):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.attn_norm = RMSNorm(dim)
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        self.mlp_norm = RMSNorm(dim)
        self.moe = MoE(dim, ffn, experts, top_k)

    def forward(self, x):
        b, s, _ = x.shape
        a = self.attn_norm(x)
        split = lambda t, h: t.view(b, s, h, self.head_dim).transpose(1, 2)
        q = rotate(split(self.wq(a), self.heads))
        k = rotate(split(self.wk(a), self.kv_heads))
        v = split(self.wv(a), self.kv_heads)
        x = x + self.wo(attention(q, k, v).transpose(1, 2).reshape(b, s, -1))
        return x + self.moe(self.mlp_norm(x))


class MoEDecoder(nn.Module):
    def __init__(self, layers, dim, heads, kv_heads, ffn, vocab, experts,
                 top_k):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(
            Block(dim, heads, kv_heads, ffn, experts, top_k)
            for _ in range(layers))
        self.norm = RMSNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens):
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.norm(x))


def small():
    """2 layers, 8 experts of which each token uses 2: 3.5M parameters."""
    return MoEDecoder(layers=2, dim=256, heads=8, kv_heads=4, ffn=256,
                      vocab=1000, experts=8, top_k=2)


def tiny():
    """For tests: 2 layers of width 32, 4 experts, top-2."""
    return MoEDecoder(layers=2, dim=32, heads=4, kv_heads=2, ffn=24,
                      vocab=13, experts=4, top_k=2)
