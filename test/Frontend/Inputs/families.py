"""Decoder families written the way their Hugging Face implementations
write them, in plain PyTorch (torch 1.13 runs them; transformers is not
needed): the structures real checkpoints contain, each family a small
two-layer model.

| family  | what it brings                                                   |
|---------|------------------------------------------------------------------|
| llama   | RMSNorm (x.pow(2).mean()), rotary tables from an inv_freq buffer |
|         | by a matmul with the positions, grouped-query heads, SwiGLU      |
| mistral | llama with a sliding window: SDPA with an explicit boolean mask  |
| qwen2   | q/k/v biases                                                     |
| qwen3   | q/k RMSNorm per head before the rotation                         |
| olmo2   | q/k RMSNorm over the whole projection, norms after each sublayer |
| gemma   | tied embeddings scaled by sqrt(d), (1 + w) RMSNorm, GeGLU (tanh) |
|         | one K/V head                                                     |
| gemma2  | eager attention with logit soft-capping, a sliding-window layer  |
|         | and a global one, norms before and after, final soft-capping     |
| granite | embedding, attention, residual and logit multipliers             |
| phi3    | fused qkv and gate_up projections, a rotation over the whole     |
|         | head (an empty pass-through slice)                               |
| neox    | LayerNorm, parallel residual, partial rotary (a quarter of each  |
|         | head), fused per-head qkv with biases, multi-head, GELU          |
| opt     | positions from cumsum of the attention mask, learned position    |
|         | embeddings offset by 2, ReLU, LayerNorm with biases              |
| mixtral | mixture of experts as transformers 4.x writes it: a gate Linear, |
|         | softmax in f32, top-2 renormalised, per-expert w1/w2/w3 run on   |
|         | the tokens torch.where picks, index_add_ back; (hidden, logits)  |
| qwen2_moe | Qwen2-MoE 4.x: gate_proj/up_proj/down_proj experts, no         |
|         | renormalisation, a shared expert times sigmoid(shared gate)      |
| mixtral_stacked | transformers 5.x: a TopKRouter with a [E, d] weight,     |
|         | experts stacked as gate_up_proj [E, 2f, d] and down_proj         |
|         | [E, d, f], a loop over the experts hit; the hidden states only   |
| mixtral_aux, qwen2_moe_aux, mixtral_stacked_aux | output_router_logits |
|         | on: the router logits of every layer (returned by each layer in  |
|         | 4.x, recorded by a forward hook on each router in 5.x),          |
|         | load_balancing_loss_func as 4.x and 5.x write it (cat, softmax,  |
|         | topk, one_hot, means), returned as .aux_loss in an output object |
|         | beside .logits; the step adds router_aux_loss_coef * aux_loss    |
|         | (0.1 here, to weigh in)                                          |
| deepseek_v3 | transformers 5.x DeepSeek-V3: a router returning f32 logits, |
|         | an e_score_correction_bias buffer; sigmoid, group-limited top-k  |
|         | (group score: the sum of a group's best two biased scores; the   |
|         | other groups' experts masked to 0), weights the unbiased scores, |
|         | renormalised (+1e-20), x routed_scaling_factor; stacked experts, |
|         | shared experts                                                   |
| deepseek_v2 | transformers 4.x DeepSeek-V2: a gate returning its choice    |
|         | (softmax, group_limited_greedy: a group's score its best), x     |
|         | routed_scaling_factor, per-expert MLPs, shared experts           |

The MoE blocks of mixtral and qwen2_moe take a `capacity_factor` (None:
dropless, as in Hugging Face): set, each expert keeps at most
ceil(C T k / E) assignments, in token order then choice order; the test's
PyTorch reference of `dc_torch export --moe-capacity-factor C`
(torch_step.py), written here apart from dc_torch's static form.

`FAMILIES` maps each name to its factory; `make(name, size)` builds one at
"test" size (tiny, for CI) or "gpu" size (rows of 128 to 512, for the GPU
test script: bench/hf_frontend.py export --plain)."""

import math
import types

import torch
import torch.nn as nn
import torch.nn.functional as F

SIZES = {
    # dim, heads, kv_heads, ffn, vocab, window; experts, top_k, moe_ffn
    # (each expert's), shared_ffn (Qwen2-MoE's shared expert)
    "test": dict(dim=32, heads=4, kv_heads=2, ffn=40, vocab=13, window=3,
                 experts=4, top_k=2, moe_ffn=24, shared_ffn=40),
    "gpu": dict(dim=128, heads=4, kv_heads=2, ffn=256, vocab=512, window=16,
                experts=8, top_k=2, moe_ffn=128, shared_ffn=256),
}


def sdpa(q, k, v, mask=None, causal=True, scale=None):
    """F.scaled_dot_product_attention where torch has it (and while
    dc_torch exports, which puts its own there); the math otherwise, with
    the same grouped-query and mask semantics."""
    f = getattr(F, "scaled_dot_product_attention", None)
    if f is not None:
        kwargs = {"enable_gqa": True} if k.shape[1] != q.shape[1] else {}
        if mask is not None:
            return f(q, k, v, attn_mask=mask, scale=scale, **kwargs)
        return f(q, k, v, is_causal=causal, scale=scale, **kwargs)
    k, v = repeat_kv(k, q.shape[1] // k.shape[1]), repeat_kv(v, q.shape[1] // v.shape[1])
    s = (q @ k.transpose(-1, -2)) * (scale or 1 / math.sqrt(q.shape[-1]))
    n = s.shape[-1]
    keep = mask if mask is not None else torch.ones(n, n, dtype=torch.bool).tril()
    return s.masked_fill(keep.logical_not(), float("-inf")).softmax(-1) @ v


def repeat_kv(x, groups):
    if groups == 1:
        return x
    b, h, s, d = x.shape
    return x[:, :, None, :, :].expand(b, h, groups, s, d).reshape(b, h * groups, s, d)


def sliding_window_mask(seq, window):
    """True where query i may read key j: causal, at most `window` back
    (Hugging Face's sliding-window mask, from position ids)."""
    i = torch.arange(seq)[:, None]
    j = torch.arange(seq)[None, :]
    return (j <= i) & (j > i - window)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6, offset=False):
        super().__init__()
        self.eps, self.offset = eps, offset
        self.weight = nn.Parameter(torch.zeros(dim) if offset else torch.ones(dim))

    def forward(self, x):
        dtype = x.dtype
        x = x.to(torch.float32)
        variance = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(variance + self.eps)
        if self.offset:  # Gemma: (1 + w), in f32
            return (x * (1.0 + self.weight.float())).to(dtype)
        return self.weight * x.to(dtype)


class Rotary(nn.Module):
    """cos and sin tables [B, S, rotary_dim] from the inv_freq buffer."""

    def __init__(self, rotary_dim, base=10000.0):
        super().__init__()
        inv = 1.0 / (base ** (torch.arange(0, rotary_dim, 2, dtype=torch.int64).float() / rotary_dim))
        self.register_buffer("inv_freq", inv, persistent=False)

    def forward(self, x, position_ids):
        inv = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        pos = position_ids[:, None, :].float()
        freqs = (inv @ pos).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary(q, k, cos, sin):
    """Rotates the first cos.shape[-1] features of each head, passes the
    rest through (none where the rotation covers the head)."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    d = cos.shape[-1]
    q_rot, q_pass = q[..., :d], q[..., d:]
    k_rot, k_pass = k[..., :d], k[..., d:]
    q = torch.cat([q_rot * cos + rotate_half(q_rot) * sin, q_pass], dim=-1)
    k = torch.cat([k_rot * cos + rotate_half(k_rot) * sin, k_pass], dim=-1)
    return q, k


class Attention(nn.Module):
    def __init__(self, c, f):
        super().__init__()
        self.c, self.f = c, f
        d, h, kv = c["dim"], c["heads"], c["kv_heads"]
        self.hd = d // h
        bias = f.get("qkv_bias", False)
        if f.get("fused_qkv"):
            self.qkv_proj = nn.Linear(d, (h + 2 * kv) * self.hd, bias=bias)
        else:
            self.q_proj = nn.Linear(d, h * self.hd, bias=bias)
            self.k_proj = nn.Linear(d, kv * self.hd, bias=bias)
            self.v_proj = nn.Linear(d, kv * self.hd, bias=bias)
        self.o_proj = nn.Linear(h * self.hd, d, bias=f.get("o_bias", False))
        if f.get("qk_norm") == "head":
            self.q_norm, self.k_norm = RMSNorm(self.hd), RMSNorm(self.hd)
        elif f.get("qk_norm") == "full":
            self.q_norm, self.k_norm = RMSNorm(h * self.hd), RMSNorm(kv * self.hd)

    def forward(self, x, cos, sin, mask):
        b, s, _ = x.shape
        c, f = self.c, self.f
        h, kv, hd = c["heads"], c["kv_heads"], self.hd
        if f.get("fused_qkv") == "per_head":  # GPT-NeoX: [q k v] per head
            qkv = self.qkv_proj(x).view(b, s, h, 3 * hd)
            q, k, v = qkv.split(hd, dim=-1)
            q, k, v = (t.reshape(b, s, h * hd) for t in (q, k, v))
        elif f.get("fused_qkv"):
            qkv = self.qkv_proj(x)
            q = qkv[..., : h * hd]
            k = qkv[..., h * hd: (h + kv) * hd]
            v = qkv[..., (h + kv) * hd:]
        else:
            q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        if f.get("qk_norm") == "full":
            q, k = self.q_norm(q), self.k_norm(k)
        q = q.view(b, s, h, hd).transpose(1, 2)
        k = k.view(b, s, kv, hd).transpose(1, 2)
        v = v.view(b, s, kv, hd).transpose(1, 2)
        if f.get("qk_norm") == "head":
            q, k = self.q_norm(q), self.k_norm(k)
        if cos is not None:
            q, k = apply_rotary(q, k, cos, sin)
        scale = f.get("attention_multiplier") or f.get("query_scale")
        cap = f.get("attn_softcap")
        if cap:  # eager attention, as Gemma 2 computes it
            kr, vr = repeat_kv(k, h // kv), repeat_kv(v, h // kv)
            w = (q @ kr.transpose(2, 3)) * scale
            w = torch.tanh(w / cap) * cap
            keep = mask if mask is not None else torch.ones(s, s, dtype=torch.bool).tril()
            w = w + torch.where(keep, 0.0, torch.finfo(w.dtype).min).to(w.dtype)
            w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
            o = w @ vr
        else:
            o = sdpa(q, k, v, mask=mask, scale=scale)
        return self.o_proj(o.transpose(1, 2).reshape(b, s, h * hd))


class MLP(nn.Module):
    def __init__(self, c, f):
        super().__init__()
        self.f = f
        d, ffn, bias = c["dim"], c["ffn"], f.get("mlp_bias", False)
        kind = f.get("mlp", "swiglu")
        if kind == "fused_swiglu":
            self.gate_up_proj = nn.Linear(d, 2 * ffn, bias=False)
            self.down_proj = nn.Linear(ffn, d, bias=False)
        elif kind in ("swiglu", "geglu"):
            self.gate_proj = nn.Linear(d, ffn, bias=bias)
            self.up_proj = nn.Linear(d, ffn, bias=bias)
            self.down_proj = nn.Linear(ffn, d, bias=bias)
        else:  # gelu, relu: two layers with biases
            self.fc1 = nn.Linear(d, ffn, bias=True)
            self.fc2 = nn.Linear(ffn, d, bias=True)

    def forward(self, x):
        kind = self.f.get("mlp", "swiglu")
        if kind == "fused_swiglu":
            gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
            return self.down_proj(F.silu(gate) * up)
        if kind == "swiglu":
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
        if kind == "geglu":
            return self.down_proj(F.gelu(self.gate_proj(x), approximate="tanh") * self.up_proj(x))
        act = F.relu if kind == "relu" else F.gelu
        return self.fc2(act(self.fc1(x)))


# -- mixtures of experts ----------------------------------------------------------


class ExpertMLP(nn.Module):
    """One SwiGLU expert under the names its family gives the three
    projections: (gate, up, down) = Mixtral's (w1, w3, w2) or Qwen's
    (gate_proj, up_proj, down_proj)."""

    def __init__(self, dim, ffn, names):
        super().__init__()
        self.names = names
        gate, up, down = names
        setattr(self, gate, nn.Linear(dim, ffn, bias=False))
        setattr(self, up, nn.Linear(dim, ffn, bias=False))
        setattr(self, down, nn.Linear(ffn, dim, bias=False))
        self.act_fn = nn.SiLU()

    def forward(self, x):
        gate, up, down = (getattr(self, n) for n in self.names)
        return down(self.act_fn(gate(x)) * up(x))


def within_capacity(chosen, num_experts, capacity_factor):
    """[T, k] bool: which assignments their expert keeps when each expert
    takes at most ceil(C T k / E), first come first served in token order,
    then choice order (a Python loop: the reference, not a fast form)."""
    tokens, k = chosen.shape
    capacity = math.ceil(capacity_factor * tokens * k / num_experts)
    taken = [0] * num_experts
    kept = torch.zeros(tokens, k, dtype=torch.bool)
    for t in range(tokens):
        for j in range(k):
            e = int(chosen[t, j])
            if taken[e] < capacity:
                taken[e] += 1
                kept[t, j] = True
    return kept


def expert_mask(chosen, num_experts, capacity_factor):
    """[experts, top_k, tokens] one-hot of each token's choices, the
    choices past their expert's capacity removed where there is one."""
    mask = F.one_hot(chosen, num_classes=num_experts)
    if capacity_factor is not None:
        mask = mask * within_capacity(chosen, num_experts,
                                      capacity_factor)[..., None]
    return mask.permute(2, 1, 0)


class MixtralSparseMoe(nn.Module):
    """transformers 4.x MixtralSparseMoeBlock: each expert runs on the
    tokens torch.where finds in its one-hot mask, index_add_ sums them
    back; returns (hidden, router logits)."""

    def __init__(self, c):
        super().__init__()
        self.hidden_dim, self.num_experts, self.top_k = c["dim"], c["experts"], c["top_k"]
        self.gate = nn.Linear(self.hidden_dim, self.num_experts, bias=False)
        self.experts = nn.ModuleList(
            ExpertMLP(self.hidden_dim, c["moe_ffn"], ("w1", "w3", "w2"))
            for _ in range(self.num_experts))
        self.jitter_noise = 0.0
        self.capacity_factor = None

    def forward(self, hidden_states):
        b, s, d = hidden_states.shape
        x = hidden_states.view(-1, d)
        router_logits = self.gate(x)
        probs = F.softmax(router_logits, dim=1, dtype=torch.float)
        weights, chosen = torch.topk(probs, self.top_k, dim=-1)
        weights /= weights.sum(dim=-1, keepdim=True)
        weights = weights.to(x.dtype)
        out = torch.zeros((b * s, d), dtype=x.dtype, device=x.device)
        # [experts, top_k, tokens]: which (slot, token) pairs chose each expert
        mask = expert_mask(chosen, self.num_experts, self.capacity_factor)
        for e in range(self.num_experts):
            slot, token = torch.where(mask[e])
            picked = x[None, token].reshape(-1, d)
            y = self.experts[e](picked) * weights[token, slot, None]
            out.index_add_(0, token, y.to(x.dtype))
        return out.reshape(b, s, d), router_logits


class Qwen2SparseMoe(nn.Module):
    """transformers 4.x Qwen2MoeSparseMoeBlock: the experts hit (a Python
    list from nonzero), top-k weights not renormalised (norm_topk_prob
    False), plus a shared expert scaled by sigmoid(shared_expert_gate(x))."""

    def __init__(self, c):
        super().__init__()
        d = c["dim"]
        self.num_experts, self.top_k, self.norm_topk_prob = c["experts"], c["top_k"], False
        self.gate = nn.Linear(d, self.num_experts, bias=False)
        names = ("gate_proj", "up_proj", "down_proj")
        self.experts = nn.ModuleList(ExpertMLP(d, c["moe_ffn"], names)
                                     for _ in range(self.num_experts))
        self.shared_expert = ExpertMLP(d, c["shared_ffn"], names)
        self.shared_expert_gate = nn.Linear(d, 1, bias=False)
        self.capacity_factor = None

    def forward(self, hidden_states):
        b, s, d = hidden_states.shape
        x = hidden_states.view(-1, d)
        router_logits = self.gate(x)
        probs = F.softmax(router_logits, dim=1, dtype=torch.float)
        weights, chosen = torch.topk(probs, self.top_k, dim=-1)
        if self.norm_topk_prob:
            weights /= weights.sum(dim=-1, keepdim=True)
        weights = weights.to(x.dtype)
        out = torch.zeros((b * s, d), dtype=x.dtype, device=x.device)
        mask = expert_mask(chosen, self.num_experts, self.capacity_factor)
        hit = (mask.sum(dim=(-1, -2)) > 0).nonzero(as_tuple=True)[0].tolist()
        for e in hit:
            slot, token = torch.where(mask[e])
            y = self.experts[e](x[None, token].reshape(-1, d)) * weights[token, slot, None]
            out.index_add_(0, token, y.to(x.dtype))
        shared = torch.sigmoid(self.shared_expert_gate(x)) * self.shared_expert(x)
        return (out + shared).reshape(b, s, d), router_logits


class TopKRouter(nn.Module):
    """transformers 5.x router: a bare [E, d] weight; returns the logits,
    the renormalised top-k probabilities (f32) and their experts."""

    def __init__(self, c):
        super().__init__()
        self.top_k, self.num_experts, self.hidden_dim = c["top_k"], c["experts"], c["dim"]
        self.weight = nn.Parameter(torch.randn(self.num_experts, self.hidden_dim)
                                   * self.hidden_dim ** -0.5)

    def forward(self, hidden_states):
        hidden_states = hidden_states.reshape(-1, self.hidden_dim)
        logits = F.linear(hidden_states, self.weight)
        probs = F.softmax(logits.float(), dim=-1)
        top, chosen = torch.topk(probs, self.top_k, dim=-1)
        top /= top.sum(dim=-1, keepdim=True)
        return logits, top, chosen


class StackedExperts(nn.Module):
    """transformers 5.x experts: every expert's weights in one tensor,
    gate_up_proj [E, 2f, d] and down_proj [E, d, f]; a loop over the
    experts that got tokens."""

    def __init__(self, c):
        super().__init__()
        e, d, f = c["experts"], c["dim"], c["moe_ffn"]
        self.num_experts = e
        self.gate_up_proj = nn.Parameter(torch.randn(e, 2 * f, d) * d ** -0.5)
        self.down_proj = nn.Parameter(torch.randn(e, d, f) * f ** -0.5)
        self.act_fn = nn.SiLU()

    def forward(self, hidden_states, top_k_index, top_k_weights):
        out = torch.zeros_like(hidden_states)
        with torch.no_grad():
            mask = F.one_hot(top_k_index, num_classes=self.num_experts).permute(2, 1, 0)
            hit = torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero()
        for e in hit:
            e = e[0]
            slot, token = torch.where(mask[e])
            gate, up = F.linear(hidden_states[token], self.gate_up_proj[e]).chunk(2, dim=-1)
            y = F.linear(self.act_fn(gate) * up, self.down_proj[e])
            y = y * top_k_weights[token, slot, None]
            out.index_add_(0, token, y.to(out.dtype))
        return out


class StackedSparseMoe(nn.Module):
    """transformers 5.x MixtralSparseMoeBlock: router and stacked experts;
    returns the hidden states only (5.x records router logits by hooks)."""

    def __init__(self, c):
        super().__init__()
        self.top_k, self.jitter_noise = c["top_k"], 0.0
        self.gate = TopKRouter(c)
        self.experts = StackedExperts(c)

    def forward(self, hidden_states):
        b, s, d = hidden_states.shape
        x = hidden_states.view(-1, d)
        _, weights, chosen = self.gate(x)
        return self.experts(x, chosen, weights).reshape(b, s, d)


def group_limited_mask(group_scores, topk_group, experts):
    """[T, E] bool: the experts of each token's topk_group best groups
    (group_scores [T, G]), as DeepSeek's routers build it: the groups'
    indices by an unsorted topk, ones scattered into zeros_like, spread
    over each group's E / G experts."""
    tokens, groups = group_scores.shape
    best = torch.topk(group_scores, k=topk_group, dim=-1, sorted=False)[1]
    mask = torch.zeros_like(group_scores)
    mask.scatter_(1, best, 1)
    mask = mask.unsqueeze(-1).expand(-1, groups, experts // groups)
    return mask.reshape(tokens, experts).bool()


class DeepseekV3TopkRouter(nn.Module):
    """transformers 5.x DeepseekV3TopkRouter: a bare [E, d] weight and the
    score-correction bias buffer [E] (zeros in a new model; DeepSeek-V3's
    auxiliary-loss-free balancing moves it outside the gradient, so a
    trained one is not: random here); returns the logits, in f32."""

    def __init__(self, c):
        super().__init__()
        self.hidden_size, self.n_routed_experts = c["dim"], c["experts"]
        self.weight = nn.Parameter(torch.randn(c["experts"], c["dim"])
                                   * c["dim"] ** -0.5)
        self.register_buffer("e_score_correction_bias",
                             0.05 * torch.randn(c["experts"]))

    def forward(self, hidden_states):
        x = hidden_states.view(-1, self.hidden_size).float()
        return F.linear(x, self.weight.float())


class DeepseekV3Moe(nn.Module):
    """transformers 5.x DeepseekV3MoE: sigmoid scores; for the choice the
    scores plus the router's correction bias, each group's score the sum
    of its two best, the experts outside the topk_group best groups
    masked_fill'ed to 0, an unsorted top-k; the weights the unbiased
    scores of the chosen experts (gather), renormalised with +1e-20 in the
    denominator and times routed_scaling_factor; stacked experts (as
    Mixtral's 5.x) plus shared experts of n_shared_experts x
    moe_intermediate_size (hidden states only)."""

    def __init__(self, c):
        super().__init__()
        self.experts = StackedExperts(c)
        self.gate = DeepseekV3TopkRouter(c)
        self.shared_experts = ExpertMLP(
            c["dim"], c["moe_ffn"] * c["n_shared"],
            ("gate_proj", "up_proj", "down_proj"))
        self.n_routed_experts, self.top_k = c["experts"], c["top_k"]
        self.n_group, self.topk_group = c["n_group"], c["topk_group"]
        self.norm_topk_prob, self.routed_scaling_factor = True, 2.5

    def route_tokens_to_experts(self, router_logits):
        e, g = self.n_routed_experts, self.n_group
        scores = router_logits.sigmoid()
        for_choice = scores + self.gate.e_score_correction_bias
        best_two = for_choice.view(-1, g, e // g).topk(2, dim=-1)[0]
        keep = group_limited_mask(best_two.sum(dim=-1), self.topk_group, e)
        for_choice = for_choice.masked_fill(~keep, 0.0)
        chosen = torch.topk(for_choice, k=self.top_k, dim=-1,
                            sorted=False)[1]
        weights = scores.gather(1, chosen)
        if self.norm_topk_prob:
            weights /= weights.sum(dim=-1, keepdim=True) + 1e-20
        return chosen, weights * self.routed_scaling_factor

    def forward(self, hidden_states):
        shape = hidden_states.shape
        chosen, weights = self.route_tokens_to_experts(
            self.gate(hidden_states))
        routed = self.experts(hidden_states.view(-1, shape[-1]), chosen,
                              weights)
        return routed.view(*shape) + self.shared_experts(hidden_states)


class DeepseekV2Gate(nn.Module):
    """transformers 4.x DeepseekV2MoEGate: an [E, d] weight, [B, S, d]
    input; logits in f32, softmax, topk_method group_limited_greedy (each
    group's score its best expert's, the experts outside the topk_group
    best groups masked_fill'ed to 0), an unsorted top-k times
    routed_scaling_factor, no renormalisation; returns the chosen experts
    and their weights."""

    def __init__(self, c):
        super().__init__()
        self.top_k, self.num_experts = c["top_k"], c["experts"]
        self.routed_scaling_factor = 2.0
        self.topk_method = "group_limited_greedy"
        self.num_group, self.topk_group = c["n_group"], c["topk_group"]
        self.weight = nn.Parameter(torch.randn(c["experts"], c["dim"])
                                   * c["dim"] ** -0.5)

    def forward(self, hidden_states):
        b, s, d = hidden_states.shape
        logits = F.linear(hidden_states.view(b * s, d).float(),
                          self.weight.float())
        scores = logits.softmax(dim=-1, dtype=torch.float32)
        group_best = scores.view(b * s, self.num_group, -1).max(dim=-1).values
        keep = group_limited_mask(group_best, self.topk_group,
                                  self.num_experts)
        weights, chosen = torch.topk(scores.masked_fill(~keep, 0.0),
                                     k=self.top_k, dim=-1, sorted=False)
        return chosen, weights * self.routed_scaling_factor


class DeepseekV2Moe(nn.Module):
    """transformers 4.x DeepseekV2MoE: the gate's choice, per-expert
    gate_proj/up_proj/down_proj MLPs run on the tokens torch.where picks,
    index_add_ back, plus shared experts (hidden states only)."""

    def __init__(self, c):
        super().__init__()
        d = c["dim"]
        names = ("gate_proj", "up_proj", "down_proj")
        self.experts = nn.ModuleList(ExpertMLP(d, c["moe_ffn"], names)
                                     for _ in range(c["experts"]))
        self.gate = DeepseekV2Gate(c)
        self.shared_experts = ExpertMLP(d, c["moe_ffn"] * c["n_shared"],
                                        names)

    def forward(self, hidden_states):
        shape = hidden_states.shape
        chosen, weights = self.gate(hidden_states)
        x = hidden_states.view(-1, shape[-1])
        out = torch.zeros_like(x)
        mask = F.one_hot(chosen, num_classes=len(self.experts))
        mask = mask.permute(2, 1, 0)
        for e, expert in enumerate(self.experts):
            slot, token = torch.where(mask[e])
            y = expert(x[token]) * weights[token, slot, None]
            out.index_add_(0, token, y.to(out.dtype))
        return out.view(*shape) + self.shared_experts(hidden_states)


MOE_BLOCKS = {"mixtral": MixtralSparseMoe, "qwen2_moe": Qwen2SparseMoe,
              "stacked": StackedSparseMoe, "deepseek_v3": DeepseekV3Moe,
              "deepseek_v2": DeepseekV2Moe}


def load_balancing_loss_func(gate_logits, num_experts, top_k):
    """The Switch Transformer load-balancing loss as transformers 4.x and
    5.x compute it without an attention mask: every layer's router logits
    [T, E] concatenated, softmax, each token's top-k experts one-hot; the
    fraction of tokens sent to each expert (per choice) times the mean
    router probability of the expert, summed, times E."""
    concatenated = torch.cat(list(gate_logits), dim=0)
    routing_weights = F.softmax(concatenated, dim=-1)
    _, selected_experts = torch.topk(routing_weights, top_k, dim=-1)
    expert_mask = F.one_hot(selected_experts, num_experts)
    tokens_per_expert = torch.mean(expert_mask.float(), dim=0)
    router_prob_per_expert = torch.mean(routing_weights, dim=0)
    overall_loss = torch.sum(tokens_per_expert *
                             router_prob_per_expert.unsqueeze(0))
    return overall_loss * num_experts


class MoeCausalLMOutput:
    """The fields of transformers' MoeCausalLMOutputWithPast a step reads."""

    def __init__(self, logits, aux_loss, router_logits):
        self.logits, self.aux_loss, self.router_logits = \
            logits, aux_loss, router_logits


class Layer(nn.Module):
    def __init__(self, c, f):
        super().__init__()
        self.f = f
        norm = (lambda: nn.LayerNorm(c["dim"])) if f.get("layer_norm") else \
            (lambda: RMSNorm(c["dim"], offset=f.get("norm_offset", False)))
        self.self_attn = Attention(c, f)
        self.mlp = MOE_BLOCKS[f["moe"]](c) if f.get("moe") else MLP(c, f)
        placement = f.get("norms", "pre")
        if placement in ("pre", "both"):
            self.input_layernorm = norm()
            if placement == "pre":
                self.post_attention_layernorm = norm()
        if placement in ("post", "both"):
            self.post_attn_norm, self.post_mlp_norm = norm(), norm()
        if placement == "both":
            self.pre_mlp_norm = norm()

    def forward(self, x, cos, sin, mask):
        f = self.f
        placement = f.get("norms", "pre")
        r = f.get("residual_multiplier", 1.0)
        if f.get("parallel"):  # GPT-NeoX: x + attn(ln1(x)) + mlp(ln2(x))
            return x + self.self_attn(self.input_layernorm(x), cos, sin, mask) \
                + self.mlp(self.post_attention_layernorm(x))
        if placement == "post":  # OLMo 2
            x = x + self.post_attn_norm(self.self_attn(x, cos, sin, mask))
            return x + self.post_mlp_norm(self.mlp(x))
        a = self.self_attn(self.input_layernorm(x), cos, sin, mask)
        if placement == "both":  # Gemma 2
            x = x + self.post_attn_norm(a)
            return x + self.post_mlp_norm(self.mlp(self.pre_mlp_norm(x)))
        x = x + a * r
        m = self.mlp(self.post_attention_layernorm(x))
        router_logits = None
        if isinstance(m, tuple):  # an MoE block's (hidden, router logits)
            m, router_logits = m
        x = x + m * r
        if f.get("aux_loss") and router_logits is not None:
            # output_router_logits (4.x): the layer returns them too.
            return x, router_logits
        return x


class Decoder(nn.Module):
    """Embedding (scaled, with learned positions, as the family does), two
    layers, the final norm, the LM head (tied or not, soft-capped or
    scaled)."""

    def __init__(self, c, f):
        super().__init__()
        self.c, self.f = c, f
        self.embed_tokens = nn.Embedding(c["vocab"], c["dim"],
                                         padding_idx=f.get("padding_idx"))
        if f.get("learned_positions"):  # OPT: offset by 2
            self.embed_positions = nn.Embedding(c["seq"] + 2, c["dim"])
        hd = c["dim"] // c["heads"]
        if not f.get("learned_positions"):
            self.rotary = Rotary(int(hd * f.get("rotary_fraction", 1.0)))
        self.layers = nn.ModuleList(Layer(c, f) for _ in range(2))
        self.norm = nn.LayerNorm(c["dim"]) if f.get("layer_norm") else \
            RMSNorm(c["dim"], offset=f.get("norm_offset", False))
        self.lm_head = nn.Linear(c["dim"], c["vocab"], bias=False)
        if f.get("aux_loss"):
            # What MixtralForCausalLM reads from its config: 0.1, not the
            # usual 0.001 or 0.02, so the auxiliary loss weighs in the test.
            self.config = types.SimpleNamespace(
                output_router_logits=True, router_aux_loss_coef=0.1)
        if f.get("tied"):
            # Rows of norm about 1, as trained tied embeddings have: with
            # N(0, 1) rows of norm sqrt(d) the first logits are in the
            # hundreds.
            nn.init.normal_(self.embed_tokens.weight, std=c["dim"] ** -0.5)
            self.lm_head.weight = self.embed_tokens.weight

    def forward(self, tokens):
        c, f = self.c, self.f
        b, s = tokens.shape
        x = self.embed_tokens(tokens)
        if f.get("scaled_embedding"):  # Gemma: a tensor of x's dtype
            x = x * torch.tensor(c["dim"] ** 0.5, dtype=x.dtype)
        x = x * f.get("embedding_multiplier", 1.0)
        if f.get("learned_positions"):
            mask = torch.ones(b, s, dtype=torch.long)
            positions = (torch.cumsum(mask, dim=1) * mask).long() - 1
            x = x + self.embed_positions(positions + 2)
        cos = sin = None
        if hasattr(self, "rotary"):
            position_ids = torch.arange(s)[None, :].expand(b, s)
            cos, sin = self.rotary(x, position_ids)
        window = f.get("sliding_window")
        all_router_logits = ()
        recorders = []
        if f.get("aux_loss") and f["moe"] == "stacked":
            # transformers 5.x: an OutputRecorder hook on each router
            # keeps the first of its results, the logits.
            def record(router, args, output):
                nonlocal all_router_logits
                all_router_logits += (output[0],)
            recorders = [m.register_forward_hook(record)
                         for m in self.modules() if isinstance(m, TopKRouter)]
        for i, layer in enumerate(self.layers):
            # Gemma 2: the first layer local, the second global.
            local = window and (f.get("alternate_window") is None or i % 2 == 0)
            mask = sliding_window_mask(s, c["window"]) if local else None
            x = layer(x, cos, sin, mask)
            if f.get("aux_loss") and not recorders:
                x, router_logits = x
                all_router_logits += (router_logits,)
        for recorder in recorders:
            recorder.remove()
        logits = self.lm_head(self.norm(x))
        if f.get("logits_scaling"):
            logits = logits / f["logits_scaling"]
        cap = f.get("final_softcap")
        if cap:
            logits = torch.tanh(logits / cap) * cap
        if f.get("aux_loss"):
            # *ForCausalLM without labels: the aux loss, not yet weighted.
            aux_loss = load_balancing_loss_func(
                all_router_logits, c["experts"], c["top_k"])
            return MoeCausalLMOutput(logits, aux_loss, all_router_logits)
        return logits


# The DeepSeek families' group-limited routing, at both sizes: 8 experts
# in 2 groups of 4, top-2 experts within the best group (the top-2 of all 8
# often spans both groups: the group mask changes the choice), one shared
# expert.
GROUPED = {"experts": 8, "top_k": 2, "n_group": 2, "topk_group": 1,
           "n_shared": 1}

FEATURES = {
    "llama": {},
    "mistral": {"sliding_window": True},
    "qwen2": {"qkv_bias": True},
    "qwen3": {"qk_norm": "head"},
    "olmo2": {"qk_norm": "full", "norms": "post"},
    "gemma": {"tied": True, "scaled_embedding": True, "norm_offset": True,
              "mlp": "geglu", "kv_heads": 1},
    "gemma2": {"tied": True, "scaled_embedding": True, "norm_offset": True,
               "mlp": "geglu", "norms": "both", "attn_softcap": 50.0,
               "final_softcap": 30.0, "sliding_window": True,
               "alternate_window": True, "query_scale": 0.125},
    "granite": {"embedding_multiplier": 12.0, "attention_multiplier": 0.015625,
                "residual_multiplier": 0.22, "logits_scaling": 8.0},
    "phi3": {"fused_qkv": True, "mlp": "fused_swiglu"},
    "neox": {"layer_norm": True, "parallel": True, "rotary_fraction": 0.25,
             "fused_qkv": "per_head", "qkv_bias": True, "o_bias": True,
             "mlp": "gelu", "kv_heads": "heads"},
    "opt": {"layer_norm": True, "learned_positions": True, "mlp": "relu",
            "qkv_bias": True, "o_bias": True, "kv_heads": "heads",
            "padding_idx": 1},
    "mixtral": {"moe": "mixtral"},
    "qwen2_moe": {"moe": "qwen2_moe", "qkv_bias": True},
    "mixtral_stacked": {"moe": "stacked"},
    "mixtral_aux": {"moe": "mixtral", "aux_loss": True},
    "qwen2_moe_aux": {"moe": "qwen2_moe", "qkv_bias": True, "aux_loss": True},
    "mixtral_stacked_aux": {"moe": "stacked", "aux_loss": True},
    "deepseek_v3": {"moe": "deepseek_v3", **GROUPED},
    "deepseek_v2": {"moe": "deepseek_v2", **GROUPED},
}


def make(name, size="test", seq=None):
    c = dict(SIZES[size])
    c["seq"] = seq or (7 if size == "test" else 128)
    f = dict(FEATURES[name])
    for key in GROUPED:  # sizes a family sets itself
        if key in f:
            c[key] = f.pop(key)
    kv = f.pop("kv_heads", None)
    if kv == "heads":
        c["kv_heads"] = c["heads"]
    elif kv:
        c["kv_heads"] = kv
    return Decoder(c, f)


FAMILIES = {name: (lambda name=name: make(name)) for name in FEATURES}
globals().update(FAMILIES)
