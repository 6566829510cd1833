"""One-op models whose exported MLIR ops.test pins."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Linear(nn.Module):
    """Embedding, then a linear layer with a bias, then SiLU."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(5, 3)
        self.proj = nn.Linear(3, 5)

    def forward(self, tokens):
        return F.silu(self.proj(self.embed(tokens)))


linear = Linear


class Indexing(nn.Module):
    """gather, scatter (a tensor and a value), scatter_add, stack and
    integer floor division along the last dim, with indices computed from
    the tokens (negative ones floor-divided too): the ops top-k routing and
    its backward trace to, without a mixture of experts."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(13, 8)
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)
        self.head = nn.Linear(8, 13)

    def forward(self, tokens):
        x = self.embed(tokens)
        mod8 = lambda v: v - torch.div(v, 8, rounding_mode="floor") * 8
        first = mod8(torch.div((tokens - 6) * 7, 2, rounding_mode="floor"))
        pick = torch.stack([first, mod8(first + 3)], dim=-1)   # [B, S, 2]
        h = self.a(x)
        g = torch.gather(h, -1, pick)
        s = torch.zeros_like(h).scatter(-1, pick, g * 2.0)
        t = torch.zeros_like(h).scatter_add(-1, pick, g)
        mask = torch.zeros_like(h).scatter(-1, pick, 1.0)
        return self.head(s + t + mask * self.b(x))


indexing = Indexing
