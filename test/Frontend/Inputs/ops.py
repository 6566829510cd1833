"""One-op models whose exported MLIR ops.test pins."""

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
