"""Models dc_torch must refuse, each with a clear error."""

import torch
import torch.nn as nn


class Base(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(7, 6)
        self.head = nn.Linear(6, 7)


class CumProd(Base):
    """aten.cumprod has no lowering."""

    def forward(self, tokens):
        return self.head(torch.cumprod(self.embed(tokens), dim=1))


class DataDependent(Base):
    """The number of kept rows depends on the token values."""

    def forward(self, tokens):
        x = self.embed(tokens)
        kept = x[tokens > 3]
        return self.head(kept.sum(0)).expand(*tokens.shape, 7)


class Counter(Base):
    """A buffer that changes in every step."""

    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, tokens):
        self.calls += 1
        return self.head(self.embed(tokens))


class BatchNormed(Base):
    """BatchNorm's running statistics are buffers updated in training."""

    def __init__(self):
        super().__init__()
        self.norm = nn.BatchNorm1d(6)

    def forward(self, tokens):
        x = self.embed(tokens)
        return self.head(self.norm(x.transpose(1, 2)).transpose(1, 2))


class BigConstant(Base):
    """A table built outside forward is a captured constant."""

    def __init__(self):
        super().__init__()
        self.table = torch.randn(5, 6)  # neither parameter nor buffer

    def forward(self, tokens):
        return self.head(self.embed(tokens) + self.table)


cumprod, data_dependent, counter, batch_normed, big_constant = (
    CumProd, DataDependent, Counter, BatchNormed, BigConstant)


class Dropped(Base):
    """Dropout in training mode draws random numbers in the step."""

    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.1)

    def forward(self, tokens):
        return self.head(self.drop(self.embed(tokens)))


dropped = Dropped


class SliceAssigned(Base):
    """An in-place write through a view of a fresh tensor."""

    def forward(self, tokens):
        x = self.embed(tokens) * 2
        x[:, 0] = 0.0
        return self.head(x)


slice_assigned = SliceAssigned


class BranchOnData(Base):
    """Python control flow on the tokens' values: one trace cannot hold
    every step's branch."""

    def forward(self, tokens):
        x = self.embed(tokens)
        if (tokens > 3).any():
            x = x * 2
        return self.head(x)


branch_on_data = BranchOnData


class PlantedNaN(Base):
    """Trains, but its step makes NaN: the log of an embedding shifted by
    0.5 (negative for about a third of the values, N(0, 1) weights). For
    dc-run --check-finite, which names this line."""

    def forward(self, tokens):
        x = self.embed(tokens)
        x = torch.log(x + 0.5)  # the planted NaN
        return self.head(x)


planted_nan = PlantedNaN


class OneHotWithoutClasses(Base):
    """F.one_hot without num_classes: as many classes as the largest
    token id says (a dynamic shape)."""

    def forward(self, tokens):
        hot = torch.nn.functional.one_hot(tokens).float()
        return self.head(self.embed(tokens)) + hot.sum(-1, keepdim=True)


one_hot_without_classes = OneHotWithoutClasses


class AuxLossOutput:
    def __init__(self, logits, aux_loss):
        self.logits, self.aux_loss = logits, aux_loss


class AuxLossWithoutCoefficient(Base):
    """An output with an aux_loss, and no router_aux_loss_coef to weigh it
    by (on the model or a config)."""

    def forward(self, tokens):
        logits = self.head(self.embed(tokens))
        return AuxLossOutput(logits, logits.pow(2).mean())


aux_loss_without_coefficient = AuxLossWithoutCoefficient


def raising():
    """A factory that fails (a missing config, say)."""
    raise RuntimeError("no config file here")


def nothing():
    """A factory that forgot its return."""
    torch.nn.Linear(2, 2)


class HiddenStates(torch.nn.Module):
    """A forward that returns the hidden states, not the LM head's logits."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(64, 8)
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, tokens):
        return self.proj(self.embed(tokens))
