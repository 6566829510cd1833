"""Scaled-dot-product attention as two opaque torch ops, dc::attention and
dc::attention_grad, so that a traced step keeps attention whole (dc's fused
dc.attention / dc.attention_grad) instead of its decomposed softmax.

While export traces, torch.nn.functional.scaled_dot_product_attention is
replaced by `scaled_dot_product_attention` below (torch < 2.0 has no such
function; a model can look it up at call time and fall back to its own
math). Grouped-query attention (fewer K/V heads) stays grouped: dc.attention
takes k and v with fewer heads than q (query head h reads K/V head
h // (H / Hkv), repeat_kv's order), and its gradients dk, dv have k's and
v's shapes, summed over each group."""

import contextlib
import math

import torch
import torch.nn.functional as F

from .library import dc_library

_defined = False


def _repeat_heads(x, groups):
    """[B, Hkv, S, D] -> [B, Hkv * groups, S, D], each head repeated."""
    if groups == 1:
        return x
    b, h, s, d = x.shape
    return x[:, :, None].expand(b, h, groups, s, d).reshape(b, h * groups, s, d)


def _sum_groups(x, groups):
    """The inverse's gradient: [B, H, S, D] summed per group of heads."""
    if groups == 1:
        return x
    b, h, s, d = x.shape
    return x.reshape(b, h // groups, groups, s, d).sum(2)


def _groups(q, k):
    return q.shape[-3] // k.shape[-3]


def _reference(q, k, v, causal, scale):
    """Attention in plain torch, in f32: (o, lse) as dc.attention defines."""
    k, v = (_repeat_heads(x, _groups(q, x)) for x in (k, v))
    s = (q.float() @ k.float().transpose(-1, -2)) * scale
    if causal:
        n = s.shape[-1]
        mask = torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1)
        s = s.masked_fill(mask, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    o = torch.exp(s - lse.unsqueeze(-1)) @ v.float()
    return o.to(q.dtype), lse


def _attention_impl(q, k, v, causal, scale):
    return _reference(q, k, v, causal, scale)


def _attention_grad_impl(q, k, v, o, lse, do, causal, scale):
    # Written out: a kernel runs below autograd, torch.autograd is off here.
    groups = _groups(q, k)
    qf, kf, vf, of, dof = (t.float() for t in (q, _repeat_heads(k, groups),
                                               _repeat_heads(v, groups), o, do))
    s = (qf @ kf.transpose(-1, -2)) * scale
    if causal:
        n = s.shape[-1]
        mask = torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1)
        s = s.masked_fill(mask, float("-inf"))
    p = torch.exp(s - lse.unsqueeze(-1))
    dv = p.transpose(-1, -2) @ dof
    dp = dof @ vf.transpose(-1, -2)
    ds = p * (dp - (dof * of).sum(-1, keepdim=True)) * scale
    dq, dk = ds @ kf, ds.transpose(-1, -2) @ qf
    dk, dv = _sum_groups(dk, groups), _sum_groups(dv, groups)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def _ops():
    """Defines dc::attention and dc::attention_grad once per process."""
    global _defined
    if not _defined:
        _defined = True
        _library = dc_library()
        _library.define("attention(Tensor q, Tensor k, Tensor v, bool causal, "
                        "float scale) -> (Tensor, Tensor)")
        _library.define("attention_grad(Tensor q, Tensor k, Tensor v, "
                        "Tensor o, Tensor lse, Tensor do, bool causal, "
                        "float scale) -> (Tensor, Tensor, Tensor)")
        _library.impl("attention", _attention_impl, "CPU")
        _library.impl("attention_grad", _attention_grad_impl, "CPU")
    return torch.ops.dc


class _Attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal, scale):
        o, lse = _ops().attention(q, k, v, causal, scale)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal, ctx.scale = causal, scale
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = _ops().attention_grad(q, k, v, o, lse, do, ctx.causal,
                                           ctx.scale)
        return dq, dk, dv, None, None


def scaled_dot_product_attention(query, key, value, attn_mask=None,
                                 dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """F.scaled_dot_product_attention for tracing, no dropout; q
    [B, H, S, D], k and v [B, Hkv, S, D] with H a multiple of Hkv. Causal
    or unmasked: dc.attention, K/V heads as they are (grouped-query
    attention). With a mask (a sliding window, padding): the attention
    written out, which the trace decomposes."""
    if dropout_p:
        raise NotImplementedError(
            "scaled_dot_product_attention with dropout_p > 0: dc exports "
            "steps with dropout off")
    if query.dim() != 4:
        raise NotImplementedError(
            f"scaled_dot_product_attention on rank {query.dim()} tensors: dc "
            "expects [batch, heads, seq, head_dim]")
    heads, kv_heads = query.shape[1], key.shape[1]
    if heads % kv_heads:
        raise NotImplementedError(
            f"{heads} query heads are not a multiple of {kv_heads} K/V heads")
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    if attn_mask is not None:
        return _masked_attention(query, key, value, attn_mask, bool(is_causal),
                                 float(scale))
    return _Attention.apply(query, key, value, bool(is_causal), float(scale))


def _masked_attention(q, k, v, mask, causal, scale):
    """Attention with an explicit mask, as PyTorch's math backend computes
    it: a boolean mask keeps the positions that are True, a float mask is
    added to the scores; the softmax in f32 for half-precision inputs."""
    groups = _groups(q, k)
    k, v = _repeat_heads(k, groups), _repeat_heads(v, groups)
    s = (q @ k.transpose(-1, -2)) * scale
    if causal:
        n, m = s.shape[-2], s.shape[-1]
        upper = torch.ones(n, m, dtype=torch.bool, device=s.device).triu(1)
        s = s.masked_fill(upper, float("-inf"))
    if mask.dtype == torch.bool:
        s = s.masked_fill(mask.logical_not(), float("-inf"))
    else:
        s = s + mask
    p = torch.softmax(s.float(), dim=-1).to(q.dtype)
    return p @ v


@contextlib.contextmanager
def fused_attention():
    """Within: F.scaled_dot_product_attention is dc's (see module doc)."""
    _ops()
    had = hasattr(F, "scaled_dot_product_attention")
    saved = getattr(F, "scaled_dot_product_attention", None)
    F.scaled_dot_product_attention = scaled_dot_product_attention
    try:
        yield
    finally:
        if had:
            F.scaled_dot_product_attention = saved
        else:
            del F.scaled_dot_product_attention
