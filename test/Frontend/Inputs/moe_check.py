"""dc_torch's mixture-of-experts form in PyTorch alone (no dc tools):

  ops      the dc:: reference kernels against their definitions written
           out (ids out of range, empty experts, out-of-range rows), and
           their backwards by torch.autograd.gradcheck in f64;
  blocks   each recognised block (families.py's Mixtral 4.x, Qwen2-MoE
           with and without renormalisation, 5.x stacked experts;
           examples/torch/moe.py's) through
           moe.static_forward against its own forward: the output, the
           router logits and the gradients of the input and of every
           parameter, under ordinary and skewed routing (every token to
           one expert, an expert with no token, all ties, k = E); the
           output in bf16 too (within 1e-2 relative);
  capacity each block with a capacity factor (dc.group_by_expert's capacity)
           against the block's own forward with families.py's loop-written
           dropping rule, under skewed and random routing where
           assignments are dropped, and with a capacity of every token
           (nothing dropped) against the dropless forward;
  steps    each MoE family's traced joint graph (trace.capture), run by
           PyTorch, against the eager step: the loss and every gradient
           (the families with an auxiliary loss, and with a capacity,
           too);
  refuse   blocks that look like MoE blocks and are not recognised, or
           compute other math, are ExportErrors naming the module.

Prints one line per case; exits 1 if any fails."""

import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import families
from dc_torch import ExportError, moe
from dc_torch.trace import capture, default_loss

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "examples", "torch"))
import moe as example  # noqa: E402  examples/torch/moe.py

TOL = 1e-5
failures = []


def report(name, err):
    ok = err <= TOL
    print(f"{name}: {'ok' if ok else 'FAILED'} (max error {err:.2g})")
    if not ok:
        failures.append(name)


def max_error(have, want):
    return float((have.double() - want.double()).abs().max()) \
        if have.numel() else 0.0


# -- the kernels ------------------------------------------------------------------


def check_ops():
    ops = moe._ops()
    ids = torch.tensor([[2, 0], [5, 2], [0, -1], [2, 3]])  # 5 and -1 out of range
    order, ends = ops.group_by_expert(ids, 4)
    flat = ids.reshape(-1).tolist()
    want = [i for e in range(4) for i, x in enumerate(flat) if x == e]
    want += [i for i, x in enumerate(flat) if not 0 <= x < 4]
    want_ends, n = [], 0
    for e in range(4):
        n += flat.count(e)
        want_ends.append(n)
    report("ops: group_by_expert (stable, out-of-range ids last)",
           float(order.tolist() != want or ends.tolist() != want_ends))

    src = torch.randn(5, 3)
    index = torch.tensor([4, -1, 0, 7, 4, 2])
    got = ops.gather_rows(src, index)
    want = torch.stack([src[i] if 0 <= i < 5 else torch.zeros(3)
                        for i in index.tolist()])
    report("ops: gather_rows (out-of-range rows zero)", max_error(got, want))

    rows = torch.randn(6, 3)
    got = ops.scatter_add_rows(rows, index, 5)
    want = torch.zeros(5, 3)
    for r, i in zip(rows, index.tolist()):
        if 0 <= i < 5:
            want[i] += r
    report("ops: scatter_add_rows (out-of-range dropped)", max_error(got, want))

    x, w = torch.randn(7, 4), torch.randn(3, 4, 5)
    ends = torch.tensor([2, 2, 5])  # expert 1 empty, rows 5..6 past the end
    got = ops.grouped_mm(x, w, ends, False)
    got_t = ops.grouped_mm(x, w.transpose(1, 2).contiguous(), ends, True)
    want = torch.zeros(7, 5)
    want[0:2], want[2:5] = x[0:2] @ w[0], x[2:5] @ w[2]
    report("ops: grouped_mm (empty group, rows past the end zero)",
           max(max_error(got, want), max_error(got_t, want)))
    b = torch.randn(7, 5)
    got = ops.grouped_weight_grad(x, b, ends)
    want = torch.stack([x[0:2].t() @ b[0:2], torch.zeros(4, 5),
                        x[2:5].t() @ b[2:5]])
    report("ops: grouped_weight_grad", max_error(got, want))

    d = torch.float64
    src = torch.randn(5, 3, dtype=d, requires_grad=True)
    ok = torch.autograd.gradcheck(lambda s: moe.gather_rows(s, index), (src,))
    rows = torch.randn(6, 3, dtype=d, requires_grad=True)
    ok &= torch.autograd.gradcheck(
        lambda s: moe.scatter_add_rows(s, index, 5), (rows,))
    x = torch.randn(7, 4, dtype=d, requires_grad=True)
    for transpose in (False, True):
        w = torch.randn(3, 5, 4, dtype=d) if transpose else \
            torch.randn(3, 4, 5, dtype=d)
        w.requires_grad_()
        ok &= torch.autograd.gradcheck(
            lambda a, b: moe.grouped_mm(a, b, ends, transpose), (x, w))
    report("ops: backwards (gradcheck, f64)", 0.0 if ok else 1.0)


# -- blocks ----------------------------------------------------------------------------


def block_config(top_k):
    return dict(dim=32, experts=4, top_k=top_k, moe_ffn=24, shared_ffn=40)


def renormalised(block):
    block.norm_topk_prob = True  # Qwen3-MoE, OLMoE
    return block


BLOCKS = {
    "mixtral": lambda k: families.MixtralSparseMoe(block_config(k)),
    "qwen2_moe": lambda k: families.Qwen2SparseMoe(block_config(k)),
    "qwen2_moe renormalised": lambda k: renormalised(
        families.Qwen2SparseMoe(block_config(k))),
    "mixtral_stacked": lambda k: families.StackedSparseMoe(block_config(k)),
    "example": lambda k: example.MoE(32, 24, experts=4, top_k=k),
}


def router_weight(block):
    return block.gate.weight


def routing(name):
    """(top_k, input, how to set the router) of a routing case."""
    torch.manual_seed(1)
    u = F.normalize(torch.randn(32), dim=0)
    # Tokens sharing a direction u: a router row along u wins (or loses)
    # for every token.
    x = torch.randn(2, 7, 32) * 0.3 + 2.0 * u

    def toward(row, scale):
        def set_router(w):
            w[row] = scale * u
        return set_router
    return {
        "random routing": (2, torch.randn(2, 7, 32), None),
        "every token to expert 0 (k = 1)": (1, x, toward(0, 8.0)),
        "expert 0 first for every token (k = 2)": (2, x, toward(0, 8.0)),
        "expert 3 gets no token": (2, x, toward(3, -8.0)),
        "all ties (zero router)": (2, x, lambda w: w.zero_()),
        "k = E": (4, torch.randn(2, 7, 32), None),
    }[name]


def loads(block, spec, x):
    logits = moe._router_logits(block, spec, x, x.reshape(-1, 32))
    ids = torch.topk(F.softmax(logits, -1), spec.top_k).indices
    return torch.bincount(ids.reshape(-1), minlength=4).tolist()


def check_block(family, case):
    k, x, set_router = routing(case)
    torch.manual_seed(0)
    block = BLOCKS[family](k)
    if set_router:
        with torch.no_grad():
            set_router(router_weight(block))
    spec = moe.recognise(family, block)
    params = [p for p in block.parameters()]

    def run(forward):
        xi = x.clone().requires_grad_()
        out = forward(xi)
        out, logits = out if isinstance(out, tuple) else (out, None)
        # A loss that weighs every output element differently.
        probe = torch.linspace(-1, 1, out.numel()).reshape(out.shape)
        loss = (out * probe).sum()
        if logits is not None:
            loss = loss + (logits * 0.1).sum()
        grads = torch.autograd.grad(loss, [xi] + params, allow_unused=True)
        return out, logits, grads

    want_out, want_logits, want_grads = run(block)
    spec.returns_logits = want_logits is not None
    out, logits, grads = run(lambda xi: moe.static_forward(block, spec, xi))
    err = max_error(out, want_out)
    if want_logits is not None:
        err = max(err, max_error(logits, want_logits))
    for g, w in zip(grads, want_grads):
        w = torch.zeros_like(g) if w is None else w
        g = torch.zeros_like(w) if g is None else g
        err = max(err, max_error(g, w))
    report(f"block {family}, {case} (tokens per expert "
           f"{loads(block, spec, x)}): output, logits, {len(grads)} grads",
           err)


def check_capacity(family, case, factor, dropless_reference=False):
    """The static form with a capacity factor against the block's own
    forward dropping by families.within_capacity (or, for a capacity no
    expert can exceed, the block's dropless forward)."""
    k, x, set_router = routing(case)
    torch.manual_seed(0)
    block = BLOCKS[family](k)
    if set_router:
        with torch.no_grad():
            set_router(router_weight(block))
    spec = moe.recognise(family, block)
    spec.returns_logits = True
    params = list(block.parameters())
    logits = moe._router_logits(block, spec, x, x.reshape(-1, 32))
    ids = torch.topk(F.softmax(logits, -1), k).indices
    dropped = int((~families.within_capacity(ids, 4, factor)).sum())

    def run(forward):
        xi = x.clone().requires_grad_()
        out, logits = forward(xi)
        probe = torch.linspace(-1, 1, out.numel()).reshape(out.shape)
        loss = (out * probe).sum() + (logits * 0.1).sum()
        return (out,) + torch.autograd.grad(loss, [xi] + params,
                                            allow_unused=True)
    block.capacity_factor = None if dropless_reference else factor
    want = run(block)
    spec.capacity_factor = factor
    have = run(lambda xi: moe.static_forward(block, spec, xi))
    err = max(max_error(h if h is not None else torch.zeros_like(w),
                        w if w is not None else torch.zeros_like(h))
              for h, w in zip(have, want))
    against = "the dropless forward" if dropless_reference else \
        "the loop-written rule"
    report(f"capacity {family}, {case}, factor {factor} ({dropped} of "
           f"{ids.numel()} assignments dropped) against {against}: output, "
           f"{len(have) - 1} grads", err)


# -- group-limited routing (DeepSeek) ----------------------------------------------


def grouped_config(**changes):
    """families.GROUPED's routing on the blocks' test sizes: 8 experts in
    2 groups of 4, the best group kept, top-2."""
    c = dict(dim=32, moe_ffn=24, shared_ffn=40, **families.GROUPED)
    c.update(changes)
    return c


GROUPED_BLOCKS = {
    "deepseek_v3": lambda **c: families.DeepseekV3Moe(grouped_config(**c)),
    "deepseek_v2": lambda **c: families.DeepseekV2Moe(grouped_config(**c)),
}


def router_scores(block, spec, x):
    """The router's softmax or sigmoid scores [T, E] of x."""
    logits = moe._router_logits(block, spec, x, x.reshape(-1, 32))
    return F.softmax(logits, -1) if spec.scoring == "softmax" else \
        torch.sigmoid(logits)


def check_grouped(family, case):
    """The static form of a group-limited block against its own forward
    (output and every gradient), and that the group mask matters: the
    tokens whose experts differ from the plain top-k of the same scores,
    and the output of the plain top-k (the block's groups ignored), which
    must differ."""
    torch.manual_seed(1)
    u = F.normalize(torch.randn(32), dim=0)
    x = torch.randn(2, 7, 32)
    torch.manual_seed(0)
    block = GROUPED_BLOCKS[family]()
    if case == "every token to group 1":
        x = x * 0.3 + 2.0 * u
        with torch.no_grad():
            block.gate.weight[4:] = 8.0 * u
    spec = moe.recognise(family, block)
    spec.returns_logits = False
    params = list(block.parameters())

    def run(forward):
        xi = x.clone().requires_grad_()
        out = forward(xi)
        probe = torch.linspace(-1, 1, out.numel()).reshape(out.shape)
        return (out,) + torch.autograd.grad((out * probe).sum(), [xi] + params,
                                            allow_unused=True)
    want = run(block)
    have = run(lambda xi: moe.static_forward(block, spec, xi))
    err = max(max_error(h if h is not None else torch.zeros_like(w),
                        w if w is not None else torch.zeros_like(h))
              for h, w in zip(have, want))
    with torch.no_grad():
        scores = router_scores(block, spec, x)
        _, grouped = moe._route(spec, scores)
        # Plain top-k of the scores the experts are chosen by (with the
        # correction bias where there is one), without the group mask.
        if spec.bias_owner is not None:
            scores = scores + spec.bias_owner.e_score_correction_bias
        plain = torch.topk(scores, spec.top_k).indices.sort(-1).values
        changed = int((grouped.sort(-1).values != plain).any(-1).sum())
        groups = spec.groups
        spec.groups = None
        ungrouped = moe.static_forward(block, spec, x)
        spec.groups = groups
    differs = max_error(ungrouped, want[0])
    loads = torch.bincount(grouped.reshape(-1), minlength=8).tolist()
    ok = err <= TOL and (changed > 0) == (case == "random routing") and \
        (differs > 1e-3) == (changed > 0)
    print(f"grouped {family}, {case} (tokens per expert {loads}; the group "
          f"mask changes the experts of {changed} of {scores.shape[0]} "
          f"tokens, the output by up to {differs:.2g}): output, "
          f"{len(have) - 1} grads: {'ok' if ok else 'FAILED'} (max error "
          f"{err:.2g})")
    if not ok:
        failures.append(f"grouped {family} {case}")


def check_bf16(family):
    """The static form in bf16 against the block's own bf16 forward: the
    same math rounded differently (the routing weights applied in f32)."""
    torch.manual_seed(0)
    block = (BLOCKS[family](2) if family in BLOCKS
             else GROUPED_BLOCKS[family]()).to(torch.bfloat16)
    spec = moe.recognise(family, block)
    x = torch.randn(2, 7, 32, dtype=torch.bfloat16)
    with torch.no_grad():
        want = block(x)
        spec.returns_logits = isinstance(want, tuple)
        have = moe.static_forward(block, spec, x)
    want, have = (t[0] if isinstance(t, tuple) else t for t in (want, have))
    err = moe._relative_error(have, want)
    ok = err <= 1e-2
    print(f"bf16 block {family}: {'ok' if ok else 'FAILED'} (relative "
          f"error {err:.2g})")
    if not ok:
        failures.append(f"bf16 {family}")


# -- whole steps -------------------------------------------------------------------


def check_step(family, capacity_factor=None):
    torch.manual_seed(0)
    model = families.make(family)
    g = torch.Generator().manual_seed(5)
    tokens = torch.randint(0, 13, (4, 7), generator=g)
    targets = torch.randint(0, 13, (4, 7), generator=g)
    graph, params = capture(model, tokens, targets,
                            moe_capacity_factor=capacity_factor)
    inputs = [t for _, t in params.trainable] + [t for _, t in params.frozen]
    traced = graph(*inputs, tokens, targets)
    for block in model.modules():
        if hasattr(block, "capacity_factor"):
            block.capacity_factor = capacity_factor
    output = model(tokens)
    if hasattr(output, "aux_loss"):  # Hugging Face's loss with labels
        loss = default_loss(output.logits, targets) + \
            model.config.router_aux_loss_coef * output.aux_loss
        family += f" (+ {model.config.router_aux_loss_coef} aux loss " \
            f"{float(output.aux_loss):.4f})"
    else:
        loss = default_loss(output, targets)
    if capacity_factor is not None:
        family += f", capacity factor {capacity_factor}"
    want = torch.autograd.grad(loss, [t for _, t in params.trainable])
    err = max_error(traced[0], loss.detach())
    for have, w in zip(traced[1:], want):
        err = max(err, max_error(have, w))
    report(f"step {family}: the traced graph's loss and {len(want)} "
           "gradients against eager PyTorch", err)


# -- refusals ------------------------------------------------------------------------


class RouterNamedDifferently(nn.Module):
    """Experts and top_k, but the router is `router` with no weight."""

    def __init__(self):
        super().__init__()
        self.top_k = 2
        self.router = nn.Sequential(nn.Linear(32, 4))
        self.experts = nn.ModuleList(nn.Linear(32, 32) for _ in range(4))

    def forward(self, x):
        return x


class GeluExperts(families.MixtralSparseMoe):
    """Mixtral's structure with a GELU computed inline: recognised by
    structure, refused by the check on the export's data."""

    def __init__(self, c):
        super().__init__(c)
        for e in self.experts:
            del e.act_fn
            e.forward = (lambda x, e=e: e.w2(F.gelu(e.w1(x)) * e.w3(x)))


class WithMoE(nn.Module):
    def __init__(self, block):
        super().__init__()
        self.embed = nn.Embedding(13, 32)
        self.block = block
        self.head = nn.Linear(32, 13)

    def forward(self, tokens):
        h = self.block(self.embed(tokens))
        return self.head(h[0] if isinstance(h, tuple) else h)


def unknown_method(block):
    block.gate.topk_method = "sinkhorn"
    return block


def check_refusal(name, model, expect):
    tokens = torch.randint(0, 13, (2, 7))
    try:
        capture(model, tokens, tokens)
        print(f"refuse {name}: FAILED (exported)")
        failures.append(name)
    except ExportError as e:
        ok = all(s in str(e) for s in expect)
        print(f"refuse {name}: {'ok' if ok else 'FAILED'}: {e}")
        if not ok:
            failures.append(name)


def main():
    check_ops()
    for family in BLOCKS:
        for case in ("random routing", "every token to expert 0 (k = 1)",
                     "expert 3 gets no token", "all ties (zero router)",
                     "k = E"):
            check_block(family, case)
    for family in GROUPED_BLOCKS:
        check_grouped(family, "random routing")
        check_grouped(family, "every token to group 1")
    for family in list(BLOCKS) + list(GROUPED_BLOCKS):
        check_bf16(family)
    for family in ("mixtral", "qwen2_moe"):
        # Every token's first choice expert 0 (k = 2): expert 0 keeps 7
        # of its 14 at factor 1; random routing at factor 0.5; factor
        # E / k = 2: a capacity of every token, nothing to drop.
        check_capacity(family, "expert 0 first for every token (k = 2)", 1.0)
        check_capacity(family, "random routing", 0.5)
        check_capacity(family, "random routing", 2.0,
                       dropless_reference=True)
    for family in ("mixtral", "qwen2_moe", "mixtral_stacked", "mixtral_aux",
                   "qwen2_moe_aux", "mixtral_stacked_aux", "deepseek_v3",
                   "deepseek_v2"):
        check_step(family)
    check_step("mixtral", capacity_factor=0.5)
    check_step("qwen2_moe_aux", capacity_factor=0.75)
    check_refusal("a router the recogniser does not know",
                  WithMoE(RouterNamedDifferently()),
                  ["module 'block'", "RouterNamedDifferently",
                   "moe_check.py:"])
    check_refusal("experts computing other math",
                  WithMoE(GeluExperts(block_config(2))),
                  ["module 'block'", "GeluExperts", "relative error"])
    for why, block, expect in (
            ("groups that do not divide the experts",
             GROUPED_BLOCKS["deepseek_v3"](n_group=3),
             ["n_group 3 does not divide the 8 experts"]),
            ("more experts than the groups kept hold",
             GROUPED_BLOCKS["deepseek_v3"](top_k=5),
             ["top_k 5 > the 4 experts of topk_group (1) groups"]),
            ("an unknown top-k method",
             unknown_method(GROUPED_BLOCKS["deepseek_v2"]()),
             ["top-k method 'sinkhorn'"])):
        check_refusal(why, WithMoE(block),
                      ["module 'block'", type(block).__name__,
                       "families.py:"] + expect)
    print(f"{'all ok' if not failures else f'{len(failures)} FAILED'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
