#!/usr/bin/env python3
"""Emit a Llama-style decoder training step as MLIR in dc's input form.

The step is one `func.func @train_step` on tensors (upstream linalg, tensor,
arith, math, and one scf.for for the embedding gradient's scatter-add; with
`--attention fused` also dc.attention and dc.attention_grad; with
`--experts` dc's routing ops, dc.topk to dc.grouped_weight_grad) holding the
forward pass and a hand-derived backward pass:

  arguments: every parameter with `{dc.param = #dc.param<id, name>}`, in the
             order of `parameter_specs` (the trainable ones, then those
             without a gradient: --router-bias's biases), then `%tokens`,
             `%targets` (tensor<BxSxi32>, named by `dc.name`);
  results:   the mean cross-entropy `tensor<f32> {dc.loss}`, then the
             gradient of every trainable parameter in parameter order
             (`{dc.grad = #dc.grad<param = id>}`, the parameter's type).

docs/models.md lists the layouts and derives every backward formula used here.
The output depends only on the options, byte for byte.
"""

import argparse
import math
import os
import sys

# dc_mlir, the MLIR writer this shares with dc_torch, is in share/dc/python
# beside bin/ in the build tree and in an installed prefix (from the source
# tree: PYTHONPATH=python).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)),
                                os.pardir, "share", "dc", "python"))
import dc_mlir  # noqa: E402
from dc_mlir import Value  # noqa: E402

PRESETS = {
    "tiny": dict(layers=2, dim=16, ffn=32, heads=2, vocab=32, batch=2, seq=8),
    "A": dict(layers=16, dim=2048, ffn=5632, heads=16, vocab=32000, batch=4,
              seq=2048),
    "B": dict(layers=8, dim=4096, ffn=11008, heads=32, vocab=32000, batch=1,
              seq=1024),
    # Llama-3's shapes (grouped-query attention: 8 key/value heads), one
    # sequence of 4096 tokens.
    "8b": dict(layers=32, dim=4096, ffn=14336, heads=32, kv_heads=8,
               vocab=128256, batch=1, seq=4096),
    "70b": dict(layers=80, dim=8192, ffn=28672, heads=64, kv_heads=8,
                vocab=128256, batch=1, seq=4096),
    # Mixture-of-experts shapes, one sequence of 4096 tokens. Every layer's
    # MLP is a token-choice MoE (ffn, the dense MLP's width, is unused).
    # Mixtral-8x7B: huggingface/transformers
    # models/mixtral/configuration_mixtral.py (its defaults are the
    # checkpoint's) and MixtralTopKRouter (softmax, top-2, the two weights
    # always renormalised).
    "mixtral-8x7b": dict(layers=32, dim=4096, ffn=14336, heads=32,
                         kv_heads=8, vocab=32000, batch=1, seq=4096,
                         experts=8, top_k=2, expert_ffn=14336,
                         router="softmax", norm_topk=True),
    # A Mixtral-shaped model that trains on one GPU (2.45B parameters): the
    # one-GPU anchor of ../shared/BENCHMARKS.md's mixture-of-experts table
    # (Hugging Face MixtralForCausalLM with these sizes: 8 layers, d 2048,
    # expert ffn 5632, 8 experts top-2, 16/8 heads, two sequences of
    # 2048). With --rotary it is that model's structure.
    "mixtral-1gpu": dict(layers=8, dim=2048, ffn=5632, heads=16, kv_heads=8,
                         vocab=32000, batch=2, seq=2048, experts=8, top_k=2,
                         expert_ffn=5632, router="softmax", norm_topk=True),
    # Qwen3-30B-A3B: its config.json on the Hub (Qwen/Qwen3-30B-A3B;
    # model_type qwen3_moe, decoder_sparse_step 1, mlp_only_layers []:
    # every layer MoE) and transformers' Qwen3MoeTopKRouter (softmax,
    # norm_topk_prob). Its head_dim is 128 (queries 4096 wide on d 2048);
    # this generator ties head_dim to dim / heads = 64, so attention here
    # has half of Qwen3's q/k/v/o width. No q/k norms.
    "qwen3-30b-a3b": dict(layers=48, dim=2048, ffn=6144, heads=32,
                          kv_heads=4, vocab=151936, batch=1, seq=4096,
                          experts=128, top_k=8, expert_ffn=768,
                          router="softmax", norm_topk=True),
    # DeepSeek-V3's MoE shape (deepseek-ai/DeepSeek-V3 config.json: hidden
    # 7168, 61 layers, 128 heads, vocab 129280; n_routed_experts 256,
    # num_experts_per_tok 8, n_shared_experts 1, moe_intermediate_size
    # 2048, scoring_func sigmoid, norm_topk_prob, routed_scaling_factor
    # 2.5; topk_method noaux_tc: the score-correction bias, n_group 8,
    # topk_group 4). Simplified: multi-head attention of head_dim 56
    # instead of multi-head latent attention (q/kv LoRA ranks 1536/512,
    # 192-wide q/k heads), every layer MoE (DeepSeek-V3's first 3 are
    # dense, 18432 wide), no multi-token prediction.
    "deepseek-v3-like": dict(layers=61, dim=7168, ffn=18432, heads=128,
                             vocab=129280, batch=1, seq=4096, experts=256,
                             top_k=8, shared_experts=1, expert_ffn=2048,
                             router="sigmoid", norm_topk=True,
                             routed_scale=2.5, router_bias=True,
                             expert_groups=8, topk_groups=4),
}

# Sizes every preset has (positive integers).
SIZE_KEYS = ("layers", "dim", "ffn", "heads", "vocab", "batch", "seq")
# Mixture-of-experts options and their defaults (experts = 0: dense MLPs;
# the others are read only with experts > 0; expert_ffn defaults to ffn).
MOE_DEFAULTS = dict(experts=0, top_k=2, shared_experts=0, expert_ffn=None,
                    router="softmax", norm_topk=False, routed_scale=1.0,
                    router_bias=False, expert_groups=1, topk_groups=None,
                    capacity_factor=None)

# The data arguments after the parameters, by their SSA and manifest
# (dc.name) names: token ids and next-token targets.
DATA = ("tokens", "targets")

RMS_EPS = 1e-5
STATS = "f32"  # element type of softmax / norm / loss statistics


class Body(dc_mlir.Body):
    """Builds the scalar region of one linalg.generic. Arithmetic happens in
    f32: `load`/`acc` widen bf16 block arguments and `narrow` rounds the
    result, the way a GPU kernel keeps bf16 in memory and f32 in registers."""

    ARGS = ("a", "o")
    OP = "e"

    def load(self, i):
        return self._widen(self.ins[i], self.in_elts[i])

    def acc(self, i=0):
        return self._widen(self.outs[i], self.out_elts[i])

    def _widen(self, v, elt):
        return v if elt == "f32" else self(f"arith.extf {v} : {elt} to f32")

    def narrow(self, v, elt):
        return v if elt == "f32" else self(f"arith.truncf {v} : f32 to {elt}")

    def add(self, a, b):
        return self(f"arith.addf {a}, {b} : f32")

    def sub(self, a, b):
        return self(f"arith.subf {a}, {b} : f32")

    def mul(self, a, b):
        return self(f"arith.mulf {a}, {b} : f32")

    def div(self, a, b):
        return self(f"arith.divf {a}, {b} : f32")

    def exp(self, a):
        return self(f"math.exp {a} : f32")

    def sigmoid(self, a, one):
        minus_a = self(f"arith.negf {a} : f32")
        return self.div(one, self.add(one, self.exp(minus_a)))

    def index_f32(self, dim):
        """Loop dim `dim`'s position as an f32."""
        i = self(f"arith.index_cast {self.index(dim)} : index to i32")
        return self(f"arith.sitofp {i} : i32 to f32")


class Emitter(dc_mlir.Module):
    """Writes the function body as text: readable SSA names, named scalar
    constants, affine maps as named aliases."""

    Body = Body
    EMPTY = FILL = "init"

    def __init__(self):
        super().__init__()
        self.map_aliases = {}

    def scalar_const(self, value, elt, hint=None):
        """A scalar constant, emitted once per (hint, value, type) at the top
        of the function. Zero, one and -inf name themselves."""
        hint = hint or {0.0: "zero", 1.0: "one", -math.inf: "neg_inf"}[value]
        return self.hoist((hint, repr(value), elt),
                          hint if elt == "f32" else f"{hint}_{elt}",
                          f"arith.constant "
                          f"{dc_mlir.float_literal(value, elt)} : {elt}")

    def map_attr(self, num_dims, results):
        """Alias of a projection map, e.g. #m3_02 = (d0, d1, d2) -> (d0, d2);
        an expression result is spelled out (1 - d3: "_1md3_")."""
        alias = f"#m{num_dims}_" + "".join(
            str(r) if isinstance(r, int) else
            "_" + r.replace(" ", "").replace("-", "m").replace("+", "p") + "_"
            for r in results)
        self.map_aliases[alias] = dc_mlir.affine_map(num_dims, results)
        return alias

    def elementwise(self, hint, ins, elt, body):
        """A parallel generic over the shape of ins[0]; broadcast inputs are
        given as (Value, dims) pairs."""
        vals, maps = [], []
        shape = ins[0].shape
        rank = len(shape)
        for x in ins:
            v, dims = x if isinstance(x, tuple) else (x, list(range(rank)))
            vals.append(v)
            maps.append(dims)
        init = self.empty(shape, elt)
        return self.generic(hint, vals, maps, [init], [list(range(rank))],
                            ["parallel"] * rank, body)

    def comment(self, text):
        self.emit("// " + text)


class LlamaStep:
    """Forward and backward of the decoder, emitted block by block."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.e = Emitter()
        self.elt = cfg.dtype
        self.n_tok = cfg.batch * cfg.seq
        self.head_dim = cfg.dim // cfg.heads
        # Grouped-query attention: kv_heads key/value heads, each shared by
        # `group` query heads (Llama-3's repeat_kv order).
        self.kv_dim = cfg.kv_heads * self.head_dim
        self.group = cfg.heads // cfg.kv_heads
        self.attn_scale = 1.0 / math.sqrt(self.head_dim)

    # -- shared pieces --------------------------------------------------------

    def add(self, hint, x, y):
        return self.e.elementwise(
            hint, [x, y], x.elt,
            lambda b: [b.narrow(b.add(b.load(0), b.load(1)), x.elt)])

    def to_param_type(self, hint, acc32):
        """Gradient reductions accumulate in f32; bf16 parameters get their
        gradient rounded once at the end."""
        if self.elt == "f32":
            return acc32
        return self.e.elementwise(
            hint, [acc32], self.elt, lambda b: [b.narrow(b.load(0), self.elt)])

    def row_reduce(self, hint, ins, in_maps, rank, init_value, body):
        """Reduce the last of `rank` loop dims into an f32 tensor of the
        leading dims' shape."""
        shape = ins[0].shape[:rank - 1]
        init = self.e.filled(shape, STATS, init_value)
        return self.e.generic(hint, ins, in_maps, [init],
                              [list(range(rank - 1))],
                              ["parallel"] * (rank - 1) + ["reduction"], body)

    # -- RMSNorm --------------------------------------------------------------

    def rmsnorm(self, hint, x, weight):
        """y = x * r * w with r = rsqrt(mean(x^2) + eps) per row (f32)."""
        e, d = self.e, self.cfg.dim
        sumsq = self.row_reduce(
            f"{hint}_sumsq", [x], [[0, 1]], 2, 0.0,
            lambda b: [b.add(b.acc(), b.mul(b.load(0), b.load(0)))])
        inv_d = e.scalar_const(1.0 / d, STATS, "inv_dim")
        eps = e.scalar_const(RMS_EPS, STATS, "rms_eps")
        rstd = e.elementwise(
            f"{hint}_rstd", [sumsq], STATS,
            lambda b: [b(f"math.rsqrt {b.add(b.mul(b.load(0), inv_d), eps)}"
                         " : f32")])
        y = e.elementwise(
            hint, [x, (rstd, [0]), (weight, [1])], self.elt,
            lambda b: [b.narrow(
                b.mul(b.mul(b.load(0), b.load(1)), b.load(2)), self.elt)])
        return y, rstd

    def rmsnorm_backward(self, hint, x, rstd, weight, dy, dresidual=None):
        """Returns (dresidual + dx, dweight), with xhat = x r, g = dy w:
        dx = r (g - xhat mean(g xhat)),  dweight = sum_rows(dy xhat). The
        residual stream's gradient is added here to save a pass over it."""
        e = self.e
        inv_d = e.scalar_const(1.0 / self.cfg.dim, STATS, "inv_dim")

        def dot_body(b):
            g = b.mul(b.load(0), b.load(1))
            xhat = b.mul(b.load(2), b.load(3))
            return [b.add(b.acc(), b.mul(g, xhat))]

        dot = self.row_reduce(f"{hint}_dot", [dy, weight, x, rstd],
                              [[0, 1], [1], [0, 1], [0]], 2, 0.0, dot_body)

        def dx_body(b):
            r = b.load(3)
            g = b.mul(b.load(0), b.load(1))
            xhat = b.mul(b.load(2), r)
            mean = b.mul(b.load(4), inv_d)
            dx = b.mul(r, b.sub(g, b.mul(xhat, mean)))
            if dresidual is not None:
                dx = b.add(b.load(5), dx)
            return [b.narrow(dx, self.elt)]

        ins = [dy, (weight, [1]), x, (rstd, [0]), (dot, [0])]
        dx = e.elementwise(f"{hint}_dx", ins + ([dresidual] if dresidual else []),
                           self.elt, dx_body)
        dw_init = e.filled([self.cfg.dim], STATS, 0.0)
        dw32 = e.generic(
            f"{hint}_dw32", [dy, x, rstd], [[0, 1], [0, 1], [0]], [dw_init],
            [[1]], ["reduction", "parallel"],
            lambda b: [b.add(b.acc(),
                             b.mul(b.load(0), b.mul(b.load(1), b.load(2))))])
        return dx, self.to_param_type(f"{hint}_dw", dw32)

    # -- attention ------------------------------------------------------------

    def split_heads(self, hint, x, heads=None):
        """[B*S, heads*Dh] -> [B*heads, S, Dh] (expand, transpose, collapse);
        heads defaults to the query heads."""
        c, e = self.cfg, self.e
        heads = heads or c.heads
        x4 = e.expand(f"{hint}_4d", x, [[0, 1], [2, 3]],
                      [c.batch, c.seq, heads, self.head_dim])
        xt = e.transpose(f"{hint}_t", x4, [0, 2, 1, 3])
        return e.collapse(hint, xt, [[0, 1], [2], [3]])

    def merge_heads(self, hint, x, heads=None):
        """[B*heads, S, Dh] -> [B*S, heads*Dh]."""
        c, e = self.cfg, self.e
        heads = heads or c.heads
        x4 = e.expand(f"{hint}_4d", x, [[0, 1], [2], [3]],
                      [c.batch, heads, c.seq, self.head_dim])
        xt = e.transpose(f"{hint}_t", x4, [0, 2, 1, 3])
        return e.collapse(hint, xt, [[0, 1], [2, 3]])

    def rotary_tables(self):
        """cos and sin (f32, [S, Dh/2]) of the angle s * theta^(-2i/Dh) of
        position s and frequency i: Llama's rotary embedding, computed once
        per step in the graph (from the loop indices, no input)."""
        c, e = self.cfg, self.e
        half = self.head_dim // 2
        log_step = e.scalar_const(
            -2.0 * math.log(c.rope_theta) / self.head_dim, STATS,
            "rope_log_step")

        def angles(b):
            inv_freq = b.exp(b.mul(b.index_f32(1), log_step))
            angle = b.mul(b.index_f32(0), inv_freq)
            return [b(f"math.cos {angle} : f32"),
                    b(f"math.sin {angle} : f32")]

        inits = [e.empty([c.seq, half], STATS), e.empty([c.seq, half], STATS)]
        return e.generic("rope", [], [], inits, [[0, 1], [0, 1]],
                         ["parallel"] * 2, angles)

    def rotate(self, hint, x, heads, inverse=False):
        """x [B*S, heads*Dh] with each head's halves (x1, x2) rotated by the
        position's angles: (x1 c - x2 s, x2 c + x1 s); the inverse (the
        gradient) rotates back. One elementwise op over [B, S, heads, 2,
        Dh/2] that reads each element's partner in the other half at
        1 - j."""
        c, e = self.cfg, self.e
        half = self.head_dim // 2
        pairs = e.expand(f"{hint}_pairs", x, [[0, 1], [2, 3, 4]],
                         [c.batch, c.seq, heads, 2, half])
        cos, sin = self.tables
        zero = e.index_const(0)

        def body(b):
            first = b(f"arith.cmpi eq, {b.index(3)}, {zero} : index")
            turned = b.mul(b.load(1), b.load(3))
            minus = b(f"arith.negf {turned} : f32")
            plus, neg = (minus, turned) if inverse else (turned, minus)
            sign = b(f"arith.select {first}, {neg}, {plus} : f32")
            return [b.narrow(b.add(b.mul(b.load(0), b.load(2)), sign),
                             x.elt)]

        init = e.empty(pairs.shape, x.elt)
        out = e.generic(hint, [pairs, pairs, cos, sin],
                        [[0, 1, 2, 3, 4], [0, 1, 2, "1 - d3", 4], [1, 4],
                         [1, 4]], [init], [[0, 1, 2, 3, 4]], ["parallel"] * 5,
                        body)
        return e.collapse(f"{hint}_2d", out, [[0, 1], [2, 3, 4]])

    def qkv_columns(self):
        """(name, first column, width) of q, k, v in the fused projection."""
        d, kv = self.cfg.dim, self.kv_dim
        return (("q", 0, d), ("k", d, kv), ("v", d + kv, kv))

    def repeat_kv(self, hint, x):
        """[B*Hkv, S, Dh] -> [B*H, S, Dh], each key/value head repeated for
        the `group` query heads that share it (a broadcast generic)."""
        if self.group == 1:
            return x
        e = self.e
        rows, seq, dh = x.shape
        init = e.empty([rows, self.group, seq, dh], x.elt)
        rep = e.generic(f"{hint}_rep", [x], [[0, 2, 3]], [init],
                        [[0, 1, 2, 3]], ["parallel"] * 4,
                        lambda b: [b.ins[0]])
        return e.collapse(hint, rep, [[0, 1], [2], [3]])

    def sum_groups(self, hint, x):
        """The inverse's gradient: [B*H, S, Dh] summed over each group of
        query heads into [B*Hkv, S, Dh] (f32 accumulation, rounded once)."""
        if self.group == 1:
            return x
        e = self.e
        rows, seq, dh = x.shape
        x4 = e.expand(f"{hint}_4d", x, [[0, 1], [2], [3]],
                      [rows // self.group, self.group, seq, dh])
        init = e.filled([rows // self.group, seq, dh], "f32", 0.0)
        acc = e.generic(f"{hint}_acc", [x4], [[0, 1, 2, 3]], [init],
                        [[0, 2, 3]],
                        ["parallel", "reduction", "parallel", "parallel"],
                        lambda b: [b.add(b.acc(), b.load(0))])
        return self.to_param_type(hint, acc)

    def attention(self, p, x, w_qkv, w_o):
        """Causal multi-head (grouped-query when kv_heads < heads) attention
        on normed x; returns the output and what backward needs."""
        e, c, n = self.e, self.cfg, self.n_tok
        qkv = e.matmul(f"{p}_qkv", x, w_qkv)
        heads = dict(q=c.heads, k=c.kv_heads, v=c.kv_heads)
        cols = {name: e.extract_slice(f"{p}_{name}_2d", qkv, [0, first],
                                      [n, width])
                for name, first, width in self.qkv_columns()}
        if c.rotary:
            for name in ("q", "k"):
                cols[name] = self.rotate(f"{p}_{name}_rot", cols[name],
                                         heads[name])
        q, k, v = (self.split_heads(f"{p}_{name}", cols[name], heads[name])
                   for name in ("q", "k", "v"))
        if self.cfg.attention == "decomposed":
            k = self.repeat_kv(f"{p}_k_rep", k)
            v = self.repeat_kv(f"{p}_v_rep", v)
        if self.cfg.attention == "fused":
            heads_out, lse = e.attention(f"{p}_ctx", q, k, v,
                                         self.attn_scale, causal=True)
            saved = dict(q=q, k=k, v=v, o=heads_out, lse=lse)
        else:
            heads_out, saved = self.decomposed_attention(p, q, k, v)
        ctx = self.merge_heads(f"{p}_ctx_2d", heads_out)
        out = e.matmul(f"{p}_out", ctx, w_o)
        return out, dict(saved, ctx=ctx)

    def decomposed_attention(self, p, q, k, v):
        """softmax(mask(scale q k^T)) v in the op order dc-raise-attention
        matches; returns the heads' output and what backward needs."""
        e = self.e
        scores = e.batch_matmul(f"{p}_scores", q, k, transpose_b=True)
        scale = e.scalar_const(self.attn_scale, STATS, "attn_scale")
        neg_inf = e.scalar_const(-math.inf, STATS)

        def scale_mask(b):
            above_diagonal = b("arith.cmpi ugt, {}, {} : index".format(
                b.index(2), b.index(1)))
            scaled = b.mul(b.load(0), scale)
            return [b.narrow(b(f"arith.select {above_diagonal}, {neg_inf}, "
                               f"{scaled} : f32"), self.elt)]

        masked = e.elementwise(f"{p}_masked", [scores], self.elt, scale_mask)
        rowmax = self.row_reduce(
            f"{p}_max", [masked], [[0, 1, 2]], 3, -math.inf,
            lambda b: [b(f"arith.maximumf {b.acc()}, {b.load(0)} : f32")])
        denom = self.row_reduce(
            f"{p}_denom", [masked, rowmax], [[0, 1, 2], [0, 1]], 3, 0.0,
            lambda b: [b.add(b.acc(), b.exp(b.sub(b.load(0), b.load(1))))])
        probs = e.elementwise(
            f"{p}_probs", [masked, (rowmax, [0, 1]), (denom, [0, 1])],
            self.elt, lambda b: [b.narrow(b.div(
                b.exp(b.sub(b.load(0), b.load(1))), b.load(2)), self.elt)])
        heads_out = e.batch_matmul(f"{p}_ctx", probs, v)
        return heads_out, dict(q=q, k=k, v=v, probs=probs)

    def attention_backward(self, p, x, w_qkv, w_o, saved, dout):
        """Returns (dx, dw_qkv, dw_o) for dout = d(attention output)."""
        e, c, n = self.e, self.cfg, self.n_tok
        dw_o = e.matmul(f"{p}_dwo", saved["ctx"], dout, transpose_a=True)
        dctx = self.split_heads(
            f"{p}_dctx", e.matmul(f"{p}_dctx_2d", dout, w_o, transpose_b=True))
        if self.cfg.attention == "fused":
            dq, dk, dv = e.attention_grad(
                p, saved["q"], saved["k"], saved["v"], saved["o"],
                saved["lse"], dctx, self.attn_scale, causal=True)
        else:
            dq, dk, dv = self.decomposed_attention_backward(p, saved, dctx)
            dk = self.sum_groups(f"{p}_dk_sum", dk)
            dv = self.sum_groups(f"{p}_dv_sum", dv)
        dqkv = e.empty([n, c.dim + 2 * self.kv_dim], self.elt)
        for (name, first, _), g in zip(self.qkv_columns(), (dq, dk, dv)):
            heads = c.heads if name == "q" else c.kv_heads
            g2d = self.merge_heads(f"{p}_d{name}_2d", g, heads)
            if c.rotary and name != "v":
                g2d = self.rotate(f"{p}_d{name}_unrot", g2d, heads,
                                  inverse=True)
            dqkv = e.insert_slice(f"{p}_dqkv", g2d, dqkv, [0, first])
        dw_qkv = e.matmul(f"{p}_dwqkv", x, dqkv, transpose_a=True)
        dx = e.matmul(f"{p}_dx", dqkv, w_qkv, transpose_b=True)
        return dx, dw_qkv, dw_o

    def decomposed_attention_backward(self, p, saved, dctx):
        """dq, dk, dv from the saved probabilities (docs/models.md)."""
        e = self.e
        probs = saved["probs"]
        dprobs = e.batch_matmul(f"{p}_dprobs", dctx, saved["v"],
                                transpose_b=True)
        dv = e.batch_matmul(f"{p}_dv", probs, dctx, transpose_a=True)
        # Softmax: dz = p (dp - sum_j dp p); masked entries have p = 0.
        rowdot = self.row_reduce(
            f"{p}_rowdot", [dprobs, probs], [[0, 1, 2], [0, 1, 2]], 3, 0.0,
            lambda b: [b.add(b.acc(), b.mul(b.load(0), b.load(1)))])
        scale = e.scalar_const(self.attn_scale, STATS, "attn_scale")
        dscores = e.elementwise(
            f"{p}_dscores", [dprobs, probs, (rowdot, [0, 1])], self.elt,
            lambda b: [b.narrow(b.mul(b.mul(b.load(1), b.sub(
                b.load(0), b.load(2))), scale), self.elt)])
        dq = e.batch_matmul(f"{p}_dq", dscores, saved["k"])
        dk = e.batch_matmul(f"{p}_dk", dscores, saved["q"], transpose_a=True)
        return dq, dk, dv

    # -- SwiGLU MLP -----------------------------------------------------------

    def swiglu(self, hint, gate, up):
        """silu(gate) * up, elementwise."""
        one = self.e.scalar_const(1.0, STATS)

        def body(b):
            g = b.load(0)
            silu = b.mul(g, b.sigmoid(g, one))
            return [b.narrow(b.mul(silu, b.load(1)), self.elt)]

        return self.e.elementwise(hint, [gate, up], self.elt, body)

    def swiglu_backward(self, hint, dact, gate, up):
        """(dgate, dup) of act = silu(gate) * up."""
        e = self.e
        one = e.scalar_const(1.0, STATS)

        def body(b):
            # s = sigmoid(g), silu = g s, silu' = s (1 + g (1 - s))
            da, g, up = b.load(0), b.load(1), b.load(2)
            s = b.sigmoid(g, one)
            dsilu = b.mul(s, b.add(one, b.mul(g, b.sub(one, s))))
            dgate = b.mul(b.mul(da, up), dsilu)
            dup = b.mul(da, b.mul(g, s))
            return [b.narrow(dgate, self.elt), b.narrow(dup, self.elt)]

        shape = gate.shape
        return e.generic(hint, [dact, gate, up], [[0, 1]] * 3,
                         [e.empty(shape, self.elt), e.empty(shape, self.elt)],
                         [[0, 1]] * 2, ["parallel"] * 2, body)

    def mlp(self, p, x, w_gate, w_up, w_down):
        e = self.e
        gate = e.matmul(f"{p}_gate", x, w_gate)
        up = e.matmul(f"{p}_up", x, w_up)
        act = self.swiglu(f"{p}_act", gate, up)
        out = e.matmul(f"{p}_out", act, w_down)
        return out, dict(gate=gate, up=up, act=act)

    def mlp_backward(self, p, x, w_gate, w_up, w_down, saved, dout):
        """Returns (dx, dw_gate, dw_up, dw_down)."""
        e = self.e
        dw_down = e.matmul(f"{p}_dwdown", saved["act"], dout, transpose_a=True)
        dact = e.matmul(f"{p}_dact", dout, w_down, transpose_b=True)
        dgate, dup = self.swiglu_backward(f"{p}_dgate", dact, saved["gate"],
                                          saved["up"])
        dw_gate = e.matmul(f"{p}_dwgate", x, dgate, transpose_a=True)
        dw_up = e.matmul(f"{p}_dwup", x, dup, transpose_a=True)
        dx = e.matmul(f"{p}_dx", dup, w_up, transpose_b=True,
                      acc=e.matmul(f"{p}_dx_gate", dgate, w_gate,
                                   transpose_b=True))
        return dx, dw_gate, dw_up, dw_down

    # -- mixture of experts -----------------------------------------------------

    def router(self, p, x, w_router):
        """Scores [T, E] in f32 of the logits x Wg^T: a softmax over the
        experts (Mixtral, Qwen) or each expert's sigmoid (DeepSeek-V3)."""
        e, c = self.e, self.cfg
        logits = e.matmul(f"{p}_logits", x, w_router, transpose_b=True)
        if c.router == "sigmoid":
            one = e.scalar_const(1.0, STATS)
            return e.elementwise(f"{p}_scores", [logits], STATS,
                                 lambda b: [b.sigmoid(b.load(0), one)])
        rowmax = self.row_reduce(
            f"{p}_logits_max", [logits], [[0, 1]], 2, -math.inf,
            lambda b: [b(f"arith.maximumf {b.acc()}, {b.load(0)} : f32")])
        denom = self.row_reduce(
            f"{p}_logits_sumexp", [logits, rowmax], [[0, 1], [0]], 2, 0.0,
            lambda b: [b.add(b.acc(), b.exp(b.sub(b.load(0), b.load(1))))])
        return e.elementwise(
            f"{p}_scores", [logits, (rowmax, [0]), (denom, [0])], STATS,
            lambda b: [b.div(b.exp(b.sub(b.load(0), b.load(1))),
                             b.load(2))])

    def expert_capacity(self):
        """Assignments each expert keeps, ceil(C T k / E) for
        --capacity-factor C; 0: dropless."""
        c = self.cfg
        if not c.capacity_factor:
            return 0
        return math.ceil(c.capacity_factor * self.n_tok * c.top_k / c.experts)

    def choose(self, p, scores, w):
        """(the chosen experts' scores [T, K], the chosen experts [T, K]):
        the top-k of the scores; with DeepSeek-V3's routing, the top-k of
        the scores plus the correction bias (--router-bias) among the
        experts of each token's --topk-groups best groups
        (--expert-groups, a group's score the sum of its two best), and the
        unbiased scores there (a gather)."""
        e, c = self.e, self.cfg
        if not c.router_bias and c.expert_groups == 1:
            return e.topk(f"{p}_top", scores, c.top_k)
        biased = scores
        if c.router_bias:
            bias = w["moe.router_bias"]
            biased = e.elementwise(
                f"{p}_biased", [scores, (bias, [1])], STATS,
                lambda b: [b.add(b.load(0), b.load(1))])
        if c.expert_groups > 1:
            t, g = self.n_tok, c.expert_groups
            size = c.experts // g
            grouped = e.expand(f"{p}_grouped", biased, [[0], [1, 2]],
                               [t, g, size])
            best2, _ = e.topk(f"{p}_group_best2", grouped, 2)
            group_scores = self.row_reduce(
                f"{p}_group_scores", [best2], [[0, 1, 2]], 3, 0.0,
                lambda b: [b.add(b.acc(), b.load(0))])
            _, groups = e.topk(f"{p}_groups", group_scores, c.topk_groups)
            # The other groups' experts score 0 (DeepSeek's masked_fill).
            biased = e.keep_groups(f"{p}_masked", biased, groups, size,
                                   e.scalar_const(0.0, STATS))
        _, choice = e.topk(f"{p}_top", biased, c.top_k)
        return e.gather(f"{p}_top_scores", scores, choice, 1), choice

    def moe(self, p, x, w):
        """Token-choice mixture of experts on normed x [T, d]: each token's
        top-k experts by score, their SwiGLU outputs weighted by the
        (optionally renormalised) scores and summed, plus the shared
        experts' dense SwiGLU. Every shape is static: the T k assignments
        are sorted by expert (dc.group_by_expert), so expert e's rows of
        the sorted [T k, ...] tensors are [ends[e - 1], ends[e])."""
        e, c = self.e, self.cfg
        n_assign = self.n_tok * c.top_k
        scores = self.router(p, x, w["moe.router"])
        top, choice = self.choose(p, scores, w)
        saved = dict(scores=scores, choice=choice)
        weights = top
        if c.norm_topk:
            top_sum = self.row_reduce(
                f"{p}_top_sum", [top], [[0, 1]], 2, 0.0,
                lambda b: [b.add(b.acc(), b.load(0))])
            weights = e.elementwise(
                f"{p}_top_normed", [top, (top_sum, [0])], STATS,
                lambda b: [b.div(b.load(0), b.load(1))])
            saved.update(top_sum=top_sum, top_normed=weights)
        if c.routed_scale != 1.0:
            scale = e.scalar_const(c.routed_scale, STATS, "routed_scale")
            weights = e.elementwise(f"{p}_weights", [weights], STATS,
                                    lambda b: [b.mul(b.load(0), scale)])
        order, ends = e.group_by_expert(f"{p}_group", choice, c.experts,
                                        self.expert_capacity())
        # Assignment p of the flat [T, k] choices belongs to token p / k.
        k = e.hoist(("i64", c.top_k), "top_k", f"arith.constant {c.top_k} : i64")
        token = e.elementwise(
            f"{p}_token", [order], order.elt,
            lambda b: [b(f"arith.divui {b.ins[0]}, {k} : i64")])
        row_weight = e.gather_rows(
            f"{p}_row_weight", e.collapse(f"{p}_weights_flat", weights,
                                          [[0, 1]]), order)
        rows = e.gather_rows(f"{p}_rows", x, token)
        # Stacked [E, out, in] weights (torch's per-expert nn.Linear
        # layout), read transposed.
        h1 = e.grouped_matmul(f"{p}_h1", rows, w["moe.w1"], ends,
                              transpose_rhs=True)
        h3 = e.grouped_matmul(f"{p}_h3", rows, w["moe.w3"], ends,
                              transpose_rhs=True)
        act = self.swiglu(f"{p}_act", h1, h3)
        y = e.grouped_matmul(f"{p}_y", act, w["moe.w2"], ends,
                             transpose_rhs=True)
        weighted = e.elementwise(
            f"{p}_weighted", [y, (row_weight, [0])], self.elt,
            lambda b: [b.narrow(b.mul(b.load(0), b.load(1)), self.elt)])
        out = e.scatter_add_rows(f"{p}_combined", weighted, token, self.n_tok)
        assert weighted.shape[0] == n_assign
        saved.update(order=order, ends=ends, token=token,
                     row_weight=row_weight, rows=rows, h1=h1, h3=h3, act=act,
                     y=y)
        if c.shared_experts:
            shared, saved["shared"] = self.mlp(
                f"{p}_shared", x, w["moe.shared.w_gate"],
                w["moe.shared.w_up"], w["moe.shared.w_down"])
            out = self.add(f"{p}_out", out, shared)
        return out, saved

    def moe_backward(self, p, x, w, saved, dout):
        """Returns (dx, gradients by parameter suffix). The choice of experts
        is piecewise constant: gradients flow through the chosen experts'
        outputs and their weights (into the router's scores), not through
        the selection."""
        e, c, s = self.e, self.cfg, saved
        n_assign = self.n_tok * c.top_k
        g = {}
        # Combine: out[t] = sum of weighted rows of token t.
        dweighted = e.gather_rows(f"{p}_dweighted", dout, s["token"])
        dy = e.elementwise(
            f"{p}_dy", [dweighted, (s["row_weight"], [0])], self.elt,
            lambda b: [b.narrow(b.mul(b.load(0), b.load(1)), self.elt)])
        drow_weight = self.row_reduce(
            f"{p}_drow_weight", [dweighted, s["y"]], [[0, 1], [0, 1]], 2,
            0.0, lambda b: [b.add(b.acc(), b.mul(b.load(0), b.load(1)))])
        # Experts: y = act w2[e]^T, act = silu(h1) h3, h = rows w[e]^T.
        g["moe.w2"] = e.grouped_weight_grad(f"{p}_dw2", dy, s["act"],
                                            s["ends"])
        dact = e.grouped_matmul(f"{p}_dact", dy, w["moe.w2"], s["ends"])
        dh1, dh3 = self.swiglu_backward(f"{p}_dh", dact, s["h1"], s["h3"])
        g["moe.w1"] = e.grouped_weight_grad(f"{p}_dw1", dh1, s["rows"],
                                            s["ends"])
        g["moe.w3"] = e.grouped_weight_grad(f"{p}_dw3", dh3, s["rows"],
                                            s["ends"])
        drows = self.add(
            f"{p}_drows",
            e.grouped_matmul(f"{p}_drows1", dh1, w["moe.w1"], s["ends"]),
            e.grouped_matmul(f"{p}_drows3", dh3, w["moe.w3"], s["ends"]))
        dx = e.scatter_add_rows(f"{p}_dx_experts", drows, s["token"],
                                self.n_tok)
        # Routing weights: back from sorted rows to [T, k] (order is a
        # permutation), through the scale and the renormalisation
        # w = v / sum(v): dv_j = (dw_j - sum_i dw_i w_i) / sum(v).
        dweights = e.expand(
            f"{p}_dweights",
            e.scatter_add_rows(f"{p}_dweights_flat", drow_weight, s["order"],
                               n_assign), [[0, 1]], [self.n_tok, c.top_k])
        if c.routed_scale != 1.0:
            scale = e.scalar_const(c.routed_scale, STATS, "routed_scale")
            dweights = e.elementwise(f"{p}_dnormed", [dweights], STATS,
                                     lambda b: [b.mul(b.load(0), scale)])
        dtop = dweights
        if c.norm_topk:
            dot = self.row_reduce(
                f"{p}_dtop_dot", [dweights, s["top_normed"]],
                [[0, 1], [0, 1]], 2, 0.0,
                lambda b: [b.add(b.acc(), b.mul(b.load(0), b.load(1)))])
            dtop = e.elementwise(
                f"{p}_dtop", [dweights, (dot, [0]), (s["top_sum"], [0])],
                STATS, lambda b: [b.div(b.sub(b.load(0), b.load(1)),
                                        b.load(2))])
        # Top-k (or the gather of the chosen experts' scores): each value's
        # gradient back at its expert, zero elsewhere. The choice (the
        # bias, the groups) is piecewise constant and has none.
        zero = e.scalar_const(0.0, STATS)

        def put_back(b):
            expert = b(f"arith.index_cast {b.index(1)} : index to i64")
            chosen = b(f"arith.cmpi eq, {b.ins[1]}, {expert} : i64")
            picked = b(f"arith.select {chosen}, {b.ins[0]}, {zero} : f32")
            return [b.add(b.acc(), picked)]

        dscores = e.generic(
            f"{p}_dscores", [dtop, s["choice"]], [[0, 2], [0, 2]],
            [e.filled([self.n_tok, c.experts], STATS, 0.0)], [[0, 1]],
            ["parallel", "parallel", "reduction"], put_back)
        scores = s["scores"]
        if c.router == "sigmoid":
            one = e.scalar_const(1.0, STATS)
            dlogits = e.elementwise(
                f"{p}_dlogits", [dscores, scores], self.elt,
                lambda b: [b.narrow(b.mul(b.load(0), b.mul(
                    b.load(1), b.sub(one, b.load(1)))), self.elt)])
        else:
            # Softmax: dz = p (dp - sum_e dp p).
            rowdot = self.row_reduce(
                f"{p}_dscores_dot", [dscores, scores], [[0, 1], [0, 1]], 2,
                0.0, lambda b: [b.add(b.acc(), b.mul(b.load(0), b.load(1)))])
            dlogits = e.elementwise(
                f"{p}_dlogits", [dscores, scores, (rowdot, [0])], self.elt,
                lambda b: [b.narrow(b.mul(b.load(1), b.sub(
                    b.load(0), b.load(2))), self.elt)])
        g["moe.router"] = e.matmul(f"{p}_drouter", dlogits, x,
                                   transpose_a=True)
        dx = e.matmul(f"{p}_dx", dlogits, w["moe.router"], acc=dx)
        if c.shared_experts:
            dx_shared, g["moe.shared.w_gate"], g["moe.shared.w_up"], \
                g["moe.shared.w_down"] = self.mlp_backward(
                    f"{p}_shared", x, w["moe.shared.w_gate"],
                    w["moe.shared.w_up"], w["moe.shared.w_down"],
                    s["shared"], dout)
            dx = self.add(f"{p}_dx_all", dx, dx_shared)
        return dx, g

    # -- embedding and loss ---------------------------------------------------

    def embed(self, table, tokens):
        e = self.e
        out = e.empty([self.n_tok, self.cfg.dim], self.elt)

        def gather(b):
            row = b(f"arith.index_cast {b.ins[0]} : i32 to index")
            return [b(f"tensor.extract {table.name}[{row}, {b.index(1)}] : "
                      f"{table.type}")]

        return e.generic("embed", [tokens], [[0]], [out], [[0, 1]],
                         ["parallel", "parallel"], gather)

    def embed_backward(self, tokens, dx):
        """Scatter-add of dx rows into the token rows of an f32 accumulator,
        dtable[tokens[n], :] += dx[n, :], as a loop over the tokens that
        carries the table: each iteration reads one row of dx and updates one
        row of the table in place."""
        e, d = self.e, self.cfg.dim
        init = e.filled([self.cfg.vocab, d], STATS, 0.0)

        def add_row(n, acc):
            tok = e.scalar("d_embed_tok", f"tensor.extract {tokens.name}[{n}] "
                           f": {tokens.type}")
            row = e.scalar("d_embed_row",
                           f"arith.index_cast {tok} : i32 to index")
            dx_row = e.extract_slice("d_embed_dx_row", dx, [n, 0], [1, d])
            acc_row = e.extract_slice("d_embed_acc_row", acc, [row, 0], [1, d])
            summed = e.generic(
                "d_embed_sum", [dx_row], [[0, 1]], [acc_row], [[0, 1]],
                ["parallel", "parallel"],
                lambda b: [b.add(b.acc(), b.load(0))])
            return e.insert_slice("d_embed_next", summed, acc, [row, 0])

        d32 = e.for_loop("d_embed32", self.n_tok, init, add_row)
        return self.to_param_type("d_embed", d32)

    def cross_entropy(self, logits, targets):
        """Mean over tokens of logsumexp(logits) - logits[target], with the
        statistics in f32. Returns (loss, lse)."""
        e = self.e
        rowmax = self.row_reduce(
            "logits_max", [logits], [[0, 1]], 2, -math.inf,
            lambda b: [b(f"arith.maximumf {b.acc()}, {b.load(0)} : f32")])
        sumexp = self.row_reduce(
            "logits_sumexp", [logits, rowmax], [[0, 1], [0]], 2, 0.0,
            lambda b: [b.add(b.acc(), b.exp(b.sub(b.load(0), b.load(1))))])
        lse = e.elementwise(
            "lse", [rowmax, sumexp], STATS,
            lambda b: [b.add(b.load(0), b(f"math.log {b.load(1)} : f32"))])

        def nll(b):
            col = b(f"arith.index_cast {b.ins[0]} : i32 to index")
            picked = b(f"tensor.extract {logits.name}[{b.index(0)}, {col}] : "
                       f"{logits.type}")
            if self.elt != "f32":
                picked = b(f"arith.extf {picked} : {self.elt} to f32")
            return [b.add(b.acc(), b.sub(b.load(1), picked))]

        total = e.generic("nll_sum", [targets, lse], [[0], [0]],
                          [e.filled([], STATS, 0.0)], [[]],
                          ["reduction"], nll)
        inv_n = e.scalar_const(1.0 / self.n_tok, STATS, "inv_tokens")
        loss = e.generic("loss", [total], [[]], [e.empty([], STATS)], [[]], [],
                         lambda b: [b.mul(b.load(0), inv_n)])
        return loss, lse

    def cross_entropy_backward(self, logits, lse, targets):
        """dlogits = (softmax(logits) - onehot(target)) / N."""
        e = self.e
        inv_n = e.scalar_const(1.0 / self.n_tok, STATS, "inv_tokens")
        one = e.scalar_const(1.0, STATS)
        zero = e.scalar_const(0.0, STATS)

        def body(b):
            col = b(f"arith.index_cast {b.ins[2]} : i32 to index")
            is_target = b(f"arith.cmpi eq, {col}, {b.index(1)} : index")
            onehot = b(f"arith.select {is_target}, {one}, {zero} : f32")
            prob = b.exp(b.sub(b.load(0), b.load(1)))
            return [b.narrow(b.mul(b.sub(prob, onehot), inv_n), self.elt)]

        return e.elementwise("dlogits", [logits, (lse, [0]), (targets, [0])],
                             self.elt, body)

    # -- the whole step -------------------------------------------------------

    def build(self, params):
        """Emits the body; returns the function's arguments: the parameters'
        Values (in `params` order) and the data's (tokens, targets)."""
        c, e = self.cfg, self.e
        arg = {name: Value("%" + name, shape, self.elt)
               for name, shape in params}
        e.names.update(name for name, _ in params)
        e.names.update(DATA)
        data = [Value(f"%{name}", [c.batch, c.seq], "i32") for name in DATA]
        tokens = e.collapse("tokens_flat", data[0], [[0, 1]])
        targets = e.collapse("targets_flat", data[1], [[0, 1]])

        e.comment("---- forward ----")
        if c.rotary:
            self.tables = self.rotary_tables()
        h = self.embed(arg["tok_embeddings"], tokens)
        saved = []
        for i in range(c.layers):
            w = {s: arg[f"layers.{i}.{s}"]
                 for s in list(layer_params(c)) + list(layer_frozen(c))}
            e.comment(f"layer {i}: attention")
            xa, ra = self.rmsnorm(f"l{i}_attn_norm", h, w["attn_norm"])
            att, att_saved = self.attention(f"l{i}_attn", xa, w["attn.wqkv"],
                                            w["attn.wo"])
            h_mid = self.add(f"l{i}_h_attn", h, att)
            e.comment(f"layer {i}: " + ("mixture of experts" if c.experts
                                        else "SwiGLU MLP"))
            xm, rm = self.rmsnorm(f"l{i}_mlp_norm", h_mid, w["mlp_norm"])
            if c.experts:
                mlp_out, mlp_saved = self.moe(f"l{i}_moe", xm, w)
            else:
                mlp_out, mlp_saved = self.mlp(
                    f"l{i}_mlp", xm, w["mlp.w_gate"], w["mlp.w_up"],
                    w["mlp.w_down"])
            saved.append(dict(h=h, xa=xa, ra=ra, att=att_saved, h_mid=h_mid,
                              xm=xm, rm=rm, mlp=mlp_saved))
            h = self.add(f"l{i}_h_out", h_mid, mlp_out)
        e.comment("head: final norm, LM head, cross-entropy")
        hf, rf = self.rmsnorm("final_norm", h, arg["norm"])
        logits = e.matmul("logits", hf, arg["lm_head"])
        loss, lse = self.cross_entropy(logits, targets)

        e.comment("---- backward ----")
        grads = {}
        dlogits = self.cross_entropy_backward(logits, lse, targets)
        grads["lm_head"] = e.matmul("d_lm_head", hf, dlogits, transpose_a=True)
        dhf = e.matmul("d_final_norm_out", dlogits, arg["lm_head"],
                       transpose_b=True)
        dh, grads["norm"] = self.rmsnorm_backward("d_final_norm", h, rf,
                                                  arg["norm"], dhf)
        for i in reversed(range(c.layers)):
            w = {s: arg[f"layers.{i}.{s}"] for s in layer_params(c)}
            g = {}
            s = saved[i]
            if c.experts:
                e.comment(f"layer {i} backward: mixture of experts")
                dxm, g = self.moe_backward(f"d_l{i}_moe", s["xm"], w,
                                           s["mlp"], dh)
            else:
                e.comment(f"layer {i} backward: SwiGLU MLP")
                dxm, g["mlp.w_gate"], g["mlp.w_up"], g["mlp.w_down"] = \
                    self.mlp_backward(f"d_l{i}_mlp", s["xm"], w["mlp.w_gate"],
                                      w["mlp.w_up"], w["mlp.w_down"],
                                      s["mlp"], dh)
            dh, g["mlp_norm"] = self.rmsnorm_backward(
                f"d_l{i}_mlp_norm", s["h_mid"], s["rm"], w["mlp_norm"], dxm,
                dh)
            e.comment(f"layer {i} backward: attention")
            dxa, g["attn.wqkv"], g["attn.wo"] = self.attention_backward(
                f"d_l{i}_attn", s["xa"], w["attn.wqkv"], w["attn.wo"],
                s["att"], dh)
            dh, g["attn_norm"] = self.rmsnorm_backward(
                f"d_l{i}_attn_norm", s["h"], s["ra"], w["attn_norm"], dxa, dh)
            grads.update((f"layers.{i}.{k}", v) for k, v in g.items())
        grads["tok_embeddings"] = self.embed_backward(tokens, dh)

        frozen = frozen_names(c)
        results = [loss] + [grads[name] for name, _ in params
                            if name not in frozen]
        e.emit(f"return {', '.join(v.name for v in results)} : "
               f"{', '.join(v.type for v in results)}")
        return [arg[name] for name, _ in params], data


def layer_params(c):
    """Per-layer parameters (suffixes of "layers.<i>.") and their shapes, in
    id order. A mixture-of-experts layer replaces the dense MLP by the
    router [E, d], the experts' stacked weights in torch's per-expert
    [out, in] layout (w1 and w3 [E, F, d], w2 [E, d, F]) and, with shared
    experts, one dense SwiGLU of S F columns (S experts of width F side by
    side: the sum of their outputs is one MLP's)."""
    kv_dim = c.kv_heads * (c.dim // c.heads)
    shapes = {"attn_norm": [c.dim], "attn.wqkv": [c.dim, c.dim + 2 * kv_dim],
              "attn.wo": [c.dim, c.dim], "mlp_norm": [c.dim]}
    if not c.experts:
        shapes.update({"mlp.w_gate": [c.dim, c.ffn], "mlp.w_up": [c.dim, c.ffn],
                       "mlp.w_down": [c.ffn, c.dim]})
        return shapes
    e, f = c.experts, c.expert_ffn
    shapes.update({"moe.router": [e, c.dim], "moe.w1": [e, f, c.dim],
                   "moe.w2": [e, c.dim, f], "moe.w3": [e, f, c.dim]})
    if c.shared_experts:
        shared = c.shared_experts * f
        shapes.update({"moe.shared.w_gate": [c.dim, shared],
                       "moe.shared.w_up": [c.dim, shared],
                       "moe.shared.w_down": [shared, c.dim]})
    return shapes


def layer_frozen(c):
    """Per-layer parameters without a gradient, after every trainable one
    (as dc_torch's buffers): with --router-bias the router's score-
    correction bias [E] (DeepSeek-V3's e_score_correction_bias, which its
    auxiliary-loss-free balancing moves outside the gradient)."""
    return {"moe.router_bias": [c.experts]} if c.experts and \
        c.router_bias else {}


def parameter_specs(c):
    """(name, shape) of every parameter, in #dc.param id order: the
    trainable ones, then the frozen ones (frozen_names)."""
    specs = [("tok_embeddings", [c.vocab, c.dim])]
    for i in range(c.layers):
        specs += [(f"layers.{i}.{s}", shape)
                  for s, shape in layer_params(c).items()]
    specs += [("norm", [c.dim]), ("lm_head", [c.dim, c.vocab])]
    for i in range(c.layers):
        specs += [(f"layers.{i}.{s}", shape)
                  for s, shape in layer_frozen(c).items()]
    return specs


def frozen_names(c):
    return {f"layers.{i}.{s}" for i in range(c.layers)
            for s in layer_frozen(c)}


def generate(c):
    params = parameter_specs(c)
    step = LlamaStep(c)
    args, data = step.build(params)
    e = step.e
    frozen = frozen_names(c)
    count = sum(math.prod(shape) for name, shape in params
                if name not in frozen)
    millions = f" ({count / 1e6:.1f}M)" if count >= 100000 else ""
    out = [
        "// Llama-style decoder training step, generated by dc-gen-llama.",
        f"// config: layers={c.layers} dim={c.dim} ffn={c.ffn} "
        f"heads={c.heads}" +
        (f" kv_heads={c.kv_heads}" if c.kv_heads != c.heads else "") +
        f" vocab={c.vocab} batch={c.batch} seq={c.seq} "
        f"dtype={c.dtype}" +
        (" attention=fused" if c.attention == "fused" else "") +
        (f" rotary theta={c.rope_theta:g}" if c.rotary else "") +
        (f" experts={c.experts} top_k={c.top_k} expert_ffn={c.expert_ffn}"
         f" router={c.router}" +
         (f" shared_experts={c.shared_experts}" if c.shared_experts else "") +
         (" norm_topk" if c.norm_topk else "") +
         (f" routed_scale={c.routed_scale:g}" if c.routed_scale != 1.0
          else "") +
         (" router_bias" if c.router_bias else "") +
         (f" expert_groups={c.expert_groups} topk_groups={c.topk_groups}"
          if c.expert_groups > 1 else "") +
         (f" capacity_factor={c.capacity_factor:g}" if c.capacity_factor
          else "") if c.experts else ""),
        f"// parameters: {count}{millions} in {len(params) - len(frozen)} "
        "tensors" + (f", {len(frozen)} non-trainable" if frozen else ""),
        "",
    ]
    out += [f"{alias} = {text}" for alias, text in e.map_aliases.items()]
    out.append("")
    sig = [dc_mlir.param_arg(v, i, name)
           for i, (v, (name, _)) in enumerate(zip(args, params))]
    # Token ids lie in [0, vocab): the manifest tells dc-run, naming them.
    sig += [dc_mlir.vocab_arg(v, c.vocab, name) for v, name in zip(data, DATA)]
    res = [dc_mlir.LOSS_RESULT]
    res += [dc_mlir.grad_result(v.type, i)
            for i, (v, (name, _)) in enumerate(zip(args, params))
            if name not in frozen]
    out += e.function("train_step", sig, res)
    return "\n".join(out) + "\n"


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="dc-gen-llama",
        description="Emit a Llama-style decoder training step (forward and "
        "backward) as MLIR in dc's input form.")
    ap.add_argument("--config", choices=sorted(PRESETS), default="tiny",
                    help="preset sizes; the options below override them")
    for key in SIZE_KEYS:
        ap.add_argument(f"--{key}", type=int)
    ap.add_argument("--kv-heads", type=int,
                    help="key/value heads (grouped-query attention: each is "
                    "shared by heads / kv-heads query heads; default: the "
                    "preset's, else --heads)")
    ap.add_argument("--dtype", choices=["f32", "bf16"], default="f32",
                    help="element type of parameters and activations")
    ap.add_argument("--attention", choices=["decomposed", "fused"],
                    default="decomposed",
                    help="attention as linalg ops (softmax(q k^T) v) or as "
                    "dc.attention / dc.attention_grad")
    ap.add_argument("--rotary", action="store_true",
                    help="rotary position embedding of queries and keys "
                    "(Llama's half-split form; the reference configs have "
                    "none)")
    ap.add_argument("--rope-theta", type=float, default=10000.0,
                    help="rotary base: frequency i of a head is "
                    "theta^(-2i/head_dim) (default 10000)")
    moe = ap.add_argument_group(
        "mixture of experts",
        "replace each layer's SwiGLU MLP by a token-choice MoE (the options "
        "after --experts apply only with it)")
    moe.add_argument("--experts", type=int,
                     help="routed experts E per layer (0: a dense MLP)")
    moe.add_argument("--top-k", type=int,
                     help="experts each token chooses (default 2)")
    moe.add_argument("--shared-experts", type=int,
                     help="experts every token goes through (a dense SwiGLU "
                     "of shared-experts x expert-ffn columns; default 0)")
    moe.add_argument("--expert-ffn", type=int,
                     help="hidden width of each expert (default: --ffn)")
    moe.add_argument("--router", choices=["softmax", "sigmoid"],
                     help="scores of the router's logits: a softmax over "
                     "the experts (Mixtral, Qwen) or each one's sigmoid "
                     "(DeepSeek-V3); default softmax")
    moe.add_argument("--norm-topk", action=argparse.BooleanOptionalAction,
                     help="renormalise each token's k weights to sum 1")
    moe.add_argument("--routed-scale", type=float,
                     help="factor on the routed experts' weights "
                     "(DeepSeek-V3's routed_scaling_factor; default 1)")
    moe.add_argument("--router-bias", action=argparse.BooleanOptionalAction,
                     help="a score-correction bias per expert, added to the "
                     "scores for the choice only, the weights the unbiased "
                     "scores (DeepSeek-V3's e_score_correction_bias; a "
                     "parameter without a gradient)")
    moe.add_argument("--expert-groups", type=int,
                     help="group-limited routing: the experts in G groups of "
                     "E / G, each token choosing among the experts of its "
                     "--topk-groups best groups, a group's score the sum of "
                     "its two best (DeepSeek-V3's n_group; default 1: none)")
    moe.add_argument("--topk-groups", type=int,
                     help="groups each token chooses its experts from "
                     "(DeepSeek-V3's topk_group)")
    moe.add_argument("--capacity-factor", type=float,
                     help="each expert keeps at most ceil(C T k / E) of a "
                     "layer's T k assignments, in token order then choice "
                     "order; the others are dropped (the token keeps its "
                     "residual and shared experts). Bounds what "
                     "dc-expert-parallel exchanges and holds. Default: "
                     "dropless")
    ap.add_argument("-o", dest="output", default="-",
                    help="output file (default: stdout)")
    args = ap.parse_args(argv)
    given_topk_groups = args.topk_groups is not None
    preset = PRESETS[args.config]
    for key, value in preset.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
        if key in SIZE_KEYS + ("kv_heads",) and getattr(args, key) <= 0:
            ap.error(f"--{key.replace('_', '-')} must be positive")
    for key, value in MOE_DEFAULTS.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.expert_ffn is None:
        args.expert_ffn = args.ffn
    if args.experts < 0:
        ap.error("--experts must be positive (or 0: a dense MLP)")
    if args.experts and not 1 <= args.top_k <= args.experts:
        ap.error(f"--top-k must be in [1, --experts ({args.experts})], not "
                 f"{args.top_k}")
    if args.experts and args.expert_ffn <= 0:
        ap.error("--expert-ffn must be positive")
    if args.experts and args.shared_experts < 0:
        ap.error("--shared-experts must not be negative")
    if args.experts and args.routed_scale <= 0:
        ap.error("--routed-scale must be positive")
    if args.experts and args.capacity_factor is not None and \
            not args.capacity_factor > 0:
        ap.error("--capacity-factor must be positive")
    if args.experts:
        check_groups(ap, args, given_topk_groups)
    if args.kv_heads is None:  # a multi-head preset
        args.kv_heads = args.heads
    if args.kv_heads <= 0:
        ap.error("--kv-heads must be positive")
    if args.heads % args.kv_heads:
        ap.error(f"--heads ({args.heads}) must be a multiple of --kv-heads "
                 f"({args.kv_heads})")
    if args.dim % args.heads:
        ap.error(f"--dim ({args.dim}) must be a multiple of --heads "
                 f"({args.heads})")
    if args.rotary and (args.dim // args.heads) % 2:
        ap.error(f"--rotary needs an even head dim, not "
                 f"{args.dim // args.heads}")
    if args.rope_theta <= 1:
        ap.error("--rope-theta must be greater than 1")
    return args


def check_groups(ap, args, given_topk_groups):
    """Group-limited routing's options: G groups of E / G experts (at least
    two: a group's score is the sum of its two best), g of them per token,
    holding at least the k experts chosen. --expert-groups 1 (no groups)
    drops a preset's --topk-groups."""
    e, g, k = args.experts, args.expert_groups, args.top_k
    if g <= 0:
        ap.error("--expert-groups must be positive (1: no groups)")
    if g == 1:
        if given_topk_groups and args.topk_groups != 1:
            ap.error(f"--topk-groups {args.topk_groups} needs --expert-groups")
        args.topk_groups = 1
        return
    if e % g:
        ap.error(f"--expert-groups ({g}) must divide --experts ({e})")
    if e // g < 2:
        ap.error(f"--expert-groups ({g}) must leave at least 2 experts per "
                 f"group (a group's score is the sum of its two best), not "
                 f"{e // g}")
    if args.topk_groups is None:
        ap.error(f"--expert-groups ({g}) needs --topk-groups")
    if not 1 <= args.topk_groups <= g:
        ap.error(f"--topk-groups must be in [1, --expert-groups ({g})], not "
                 f"{args.topk_groups}")
    kept = args.topk_groups * (e // g)
    if k > kept:
        ap.error(f"--top-k ({k}) must be at most the {kept} experts of "
                 f"--topk-groups ({args.topk_groups}) groups of {e // g}")


def main(argv):
    args = parse_args(argv)
    text = generate(args)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        with open(args.output, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
