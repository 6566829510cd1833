"""Mixture-of-experts blocks as one static-shape graph.

A Hugging Face MoE block routes each token to its top-k experts and runs
every expert on the tokens it got: `torch.where(expert_mask[e])` and
`index_add_` (transformers 4.x), a loop over `nonzero()` experts (5.x).
The number of tokens an expert gets depends on the data, so make_fx cannot
trace that into a graph of static shapes. While export traces, a recognised
block's forward is replaced by the same math written with opaque dc ops
whose shapes depend on sizes only:

    logits  = gate(x)                                     [T, E]
    w, ids  = topk(softmax(logits in f32), k)             [T, k]  (renormalised
                                                                   where the block does)
    order, ends = dc::group_by_expert(ids, E)             [T k], [E]
    token   = order // k                 the token of each sorted assignment
    rows    = dc::gather_rows(x, token)                   [T k, d]
    h       = act(rows @ W_gate[e]^T) * (rows @ W_up[e]^T)   dc::grouped_mm
    y       = h @ W_down[e]^T                             dc::grouped_mm
    out     = dc::scatter_add_rows(y * w[order], token, T)    [T, d]

plus a shared expert where the block has one (Qwen2-MoE: its MLP times
sigmoid(shared_expert_gate(x)), computed for every token). DeepSeek's
routing chooses the experts otherwise (_route): by the scores plus a
correction bias, among the experts of each token's best groups (each
group's score from a top-2 or a max, the groups by a second top-k, the
others' experts masked to 0), its weights the unbiased scores there. The
parameters stay the block's own: the router is its gate, per-expert Linear
weights are stacked by torch.stack inside the traced step (their gradients
flow back to each expert's weight), stacked [E, ...] expert parameters
(transformers 5.x) are used as they are.

Every op has a CPU reference kernel with the semantics of the dc dialect's
op (dc.group_by_expert, dc.gather_rows, dc.scatter_add_rows,
dc.grouped_matmul, dc.grouped_weight_grad) and a backward written in these
ops, so the traced backward is static too.

Before tracing, each recognised block is run once both ways on the real
input it gets from the export's tokens (a no-grad forward of the model): a
block whose forward is not the recognised math (another activation, a
custom routing) would otherwise be exported silently wrong. A module that
looks like an MoE block but is not recognised, or whose outputs differ, is
an ExportError naming the module and where its forward is defined."""

import contextlib
import inspect
import math
import types

import torch
import torch.nn as nn
import torch.nn.functional as F

from .errors import ExportError
from .library import dc_library

# -- reference kernels (the dialect's semantics) -------------------------------


def _group_by_expert_impl(ids, experts, capacity=0):
    """order[p]: the flat index of the assignment at sorted position p,
    grouped by expert, stable; ends[e]: where expert e's rows end. Ids
    outside [0, experts) sort after every expert, in their original order.
    With capacity C > 0 each expert keeps its first C assignments in flat
    order; the rest are dropped, after every expert's rows: by expert and
    flat order, then the invalid ids (dc.group_by_expert's rule)."""
    flat = ids.reshape(-1).long()
    valid = (flat >= 0) & (flat < experts)
    key = torch.where(valid, flat, torch.full_like(flat, experts))
    order = torch.sort(key, stable=True).indices
    if capacity > 0:
        sorted_key = key[order]
        counts = torch.bincount(sorted_key, minlength=experts + 1)
        start = counts.cumsum(0) - counts
        place = torch.arange(flat.numel()) - start[sorted_key]
        kept = (sorted_key < experts) & (place < capacity)
        again = torch.where(kept, sorted_key,
                            torch.full_like(sorted_key, experts))
        order = order[torch.sort(again, stable=True).indices]
        key = again
    counts = (key[None, :] == torch.arange(experts)[:, None]).sum(1)
    return order, counts.cumsum(0)


def _valid_rows(index, rows):
    return (index >= 0) & (index < rows)


def _gather_rows_impl(src, index):
    valid = _valid_rows(index, src.shape[0])
    out = torch.zeros((index.shape[0],) + tuple(src.shape[1:]), dtype=src.dtype)
    if src.shape[0]:
        out[valid] = src[index[valid]]
    return out


def _accumulator(dtype):
    """f32 for half-precision operands (summed in f32, rounded once), f64
    for f64 ones (gradcheck)."""
    return torch.promote_types(dtype, torch.float32)


def _scatter_add_rows_impl(src, index, rows):
    valid = _valid_rows(index, rows)
    acc = _accumulator(src.dtype)
    out = torch.zeros((rows,) + tuple(src.shape[1:]), dtype=acc)
    out.index_add_(0, index[valid], src[valid].to(acc))
    return out.to(src.dtype)


def _groups(ends, rows):
    """(e, start, end) of each expert's rows, clamped to [0, rows)."""
    start = 0
    for e, end in enumerate(ends.tolist()):
        end = min(max(int(end), start), rows)
        yield e, start, end
        start = end


def _grouped_mm_impl(x, w, ends, transpose_rhs):
    cols = w.shape[1] if transpose_rhs else w.shape[2]
    acc = _accumulator(x.dtype)
    out = torch.zeros(x.shape[0], cols, dtype=acc)
    for e, start, end in _groups(ends, x.shape[0]):
        rhs = w[e].to(acc)
        out[start:end] = x[start:end].to(acc) @ (rhs.t() if transpose_rhs
                                                  else rhs)
    return out.to(x.dtype)


def _grouped_weight_grad_impl(a, b, ends):
    acc = _accumulator(a.dtype)
    out = torch.zeros(ends.shape[0], a.shape[1], b.shape[1], dtype=acc)
    for e, start, end in _groups(ends, a.shape[0]):
        out[e] = a[start:end].to(acc).t() @ b[start:end].to(acc)
    return out.to(a.dtype)


# Shapes only, for tracers that run ops on tensors without data (torch 2.x
# fake tensors).
def _group_by_expert_meta(ids, experts, capacity=0):
    return (ids.new_empty((ids.numel(),), dtype=torch.int64),
            ids.new_empty((experts,), dtype=torch.int64))


def _gather_rows_meta(src, index):
    return src.new_empty((index.shape[0],) + tuple(src.shape[1:]))


def _scatter_add_rows_meta(src, index, rows):
    return src.new_empty((rows,) + tuple(src.shape[1:]))


def _grouped_mm_meta(x, w, ends, transpose_rhs):
    return x.new_empty((x.shape[0], w.shape[1] if transpose_rhs
                        else w.shape[2]))


def _grouped_weight_grad_meta(a, b, ends):
    return a.new_empty((ends.shape[0], a.shape[1], b.shape[1]))


_SCHEMAS = {
    "group_by_expert": ("group_by_expert(Tensor ids, int experts, "
                        "int capacity=0) -> (Tensor, Tensor)",
                        _group_by_expert_impl,
                        _group_by_expert_meta),
    "gather_rows": ("gather_rows(Tensor src, Tensor index) -> Tensor",
                    _gather_rows_impl, _gather_rows_meta),
    "scatter_add_rows": ("scatter_add_rows(Tensor src, Tensor index, "
                         "int rows) -> Tensor", _scatter_add_rows_impl,
                         _scatter_add_rows_meta),
    "grouped_mm": ("grouped_mm(Tensor x, Tensor w, Tensor ends, "
                   "bool transpose_rhs) -> Tensor", _grouped_mm_impl,
                   _grouped_mm_meta),
    "grouped_weight_grad": ("grouped_weight_grad(Tensor a, Tensor b, "
                            "Tensor ends) -> Tensor",
                            _grouped_weight_grad_impl,
                            _grouped_weight_grad_meta),
}
_defined = False


def _ops():
    """Defines the dc:: MoE ops once per process."""
    global _defined
    if not _defined:
        _defined = True
        library = dc_library()
        for name, (schema, impl, meta) in _SCHEMAS.items():
            library.define(schema)
            library.impl(name, impl, "CPU")
            library.impl(name, meta, "Meta")
    return torch.ops.dc


# -- differentiable forms --------------------------------------------------------


class _GatherRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, src, index):
        ctx.save_for_backward(index)
        ctx.rows = src.shape[0]
        return _ops().gather_rows(src, index)

    @staticmethod
    def backward(ctx, grad):
        index, = ctx.saved_tensors
        return _ops().scatter_add_rows(grad, index, ctx.rows), None


class _ScatterAddRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, src, index, rows):
        ctx.save_for_backward(index)
        return _ops().scatter_add_rows(src, index, rows)

    @staticmethod
    def backward(ctx, grad):
        index, = ctx.saved_tensors
        return _ops().gather_rows(grad, index), None, None


class _GroupedMM(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, ends, transpose_rhs):
        ctx.save_for_backward(x, w, ends)
        ctx.transpose_rhs = transpose_rhs
        return _ops().grouped_mm(x, w, ends, transpose_rhs)

    @staticmethod
    def backward(ctx, dy):
        x, w, ends = ctx.saved_tensors
        ops = _ops()
        dx = dw = None
        if ctx.needs_input_grad[0]:
            # y_e = x_e W_e, so dx_e = dy_e W_e^T: the other orientation.
            dx = ops.grouped_mm(dy, w, ends, not ctx.transpose_rhs)
        if ctx.needs_input_grad[1]:
            # W_e = w[e]: dw[e] = x_e^T dy_e; W_e = w[e]^T: dw[e] = dy_e^T x_e.
            dw = (ops.grouped_weight_grad(dy, x, ends) if ctx.transpose_rhs
                  else ops.grouped_weight_grad(x, dy, ends))
        return dx, dw, None, None


def group_by_expert(ids, experts, capacity=0):
    """(order, ends); capacity C > 0: each expert keeps at most C
    assignments (see _group_by_expert_impl)."""
    return _ops().group_by_expert(ids, experts, capacity)


def gather_rows(src, index):
    return _GatherRows.apply(src, index)


def scatter_add_rows(src, index, rows):
    return _ScatterAddRows.apply(src, index, rows)


def grouped_mm(x, w, ends, transpose_rhs=False):
    return _GroupedMM.apply(x, w, ends, transpose_rhs)


# -- recognising a block -----------------------------------------------------------


class MoESpec:
    """What a recognised block computes: its router, expert layout and
    routing options."""

    def __init__(self, **fields):
        self.__dict__.update(fields)


_LIST_LAYOUTS = (("w1", "w3", "w2"),                     # Mixtral 4.x
                 ("gate_proj", "up_proj", "down_proj"))  # Qwen, OLMoE, ...


def looks_like_moe(module):
    """Experts beside a router: what an MoE block holds, recognised or not."""
    if getattr(module, "experts", None) is None:
        return False
    return any(hasattr(module, a) for a in (
        "gate", "router", "top_k", "num_experts_per_tok", "num_experts"))


def defined_at(module):
    """'file:line' of the module's forward."""
    forward = type(module).forward
    try:
        file = inspect.getsourcefile(forward)
        line = inspect.getsourcelines(forward)[1]
        return f"{file}:{line}"
    except (OSError, TypeError):
        return "an unknown line"


def _refuse(name, module, why):
    raise ExportError(
        f"module '{name}' ({type(module).__name__}, forward at "
        f"{defined_at(module)}) looks like a mixture-of-experts block but "
        f"dc_torch does not recognise it: {why}. dc exports MoE blocks as a "
        "static-shape graph only where it knows their math: a gate Linear "
        "(or router weight [E, d]), top_k, experts as a ModuleList of "
        "w1/w2/w3 or gate_proj/up_proj/down_proj Linears without bias, or "
        "stacked gate_up_proj [E, 2f, d] / down_proj [E, d, f] parameters "
        "(docs/frontend.md, 'Mixture of experts')")


def _first_attr(objects, names):
    for obj in objects:
        for n in names:
            v = getattr(obj, n, None)
            if v is not None:
                return v
    return None


def recognise(name, block):
    """The MoESpec of `block`, or an ExportError saying why not."""
    gate = getattr(block, "gate", None)
    experts = block.experts
    if isinstance(gate, nn.Linear):
        num_router = gate.out_features
    elif isinstance(gate, nn.Module) and isinstance(
            getattr(gate, "weight", None), torch.Tensor) and \
            gate.weight.dim() == 2:
        num_router = gate.weight.shape[0]  # transformers 5.x TopKRouter
    else:
        _refuse(name, block, "it has no gate Linear or router module with a "
                "[experts, hidden] weight")
    top_k = _first_attr([block, gate], ("top_k", "num_experts_per_tok"))
    if not isinstance(top_k, int) or top_k <= 0:
        _refuse(name, block, "it has no top_k (or num_experts_per_tok)")
    normalize = _first_attr([block, gate], ("norm_topk_prob",))
    # DeepSeek-V3's score-correction bias [E]: added to the scores for the
    # choice of experts only (its auxiliary-loss-free balancing updates it
    # outside the gradient), on the router (transformers) or the block.
    bias_owner = next((o for o in (gate, block) if isinstance(
        getattr(o, "e_score_correction_bias", None), torch.Tensor)), None)
    # A sigmoid router where the block says so, or where it has a
    # correction bias (DeepSeek-V3 in transformers names no scoring_func).
    scoring = _first_attr([block, gate], ("scoring_func",)) or (
        "sigmoid" if bias_owner is not None else "softmax")
    if scoring not in ("softmax", "sigmoid"):
        _refuse(name, block, f"scoring function '{scoring}'")
    method = _first_attr([block, gate], ("topk_method",))
    if method not in (None, "greedy", "group_limited_greedy", "noaux_tc"):
        _refuse(name, block, f"top-k method '{method}' (known: greedy, "
                "group_limited_greedy, noaux_tc)")
    scale = _first_attr([block, gate], ("routed_scaling_factor",))
    scale = 1.0 if scale is None else scale
    if not isinstance(scale, (int, float)) or not scale > 0:
        _refuse(name, block, f"routed_scaling_factor {scale!r}")
    if getattr(block, "jitter_noise", 0) and block.training:
        raise ExportError(
            f"module '{name}' ({type(block).__name__}) multiplies its input "
            f"by random jitter in training (jitter_noise = "
            f"{block.jitter_noise}); dc exports steps without random numbers:"
            " set router_jitter_noise = 0")

    if normalize is None:
        # Mixtral renormalises the top-k weights and has no flag; DeepSeek-
        # V2 (a topk_method) has none either and does not.
        normalize = method is None
    spec = MoESpec(top_k=top_k, scoring=scoring, normalize=bool(normalize),
                   experts=num_router, returns_logits=None,
                   routed_scale=float(scale), bias_owner=bias_owner,
                   router_logits=None,  # whether calling the router gives them
                   # Dropless: set for tracing only (static_moe).
                   capacity_factor=None, traced_capacity=None)
    if isinstance(experts, (nn.ModuleList, list, tuple)):
        layout = next((names for names in _LIST_LAYOUTS
                       if all(isinstance(getattr(experts[0], n, None),
                                         nn.Linear) for n in names)), None) \
            if len(experts) else None
        if layout is None:
            _refuse(name, block, "its experts are not MLPs of w1/w2/w3 or "
                    "gate_proj/up_proj/down_proj Linears")
        for e, expert in enumerate(experts):
            for n in layout:
                linear = getattr(expert, n, None)
                if not isinstance(linear, nn.Linear):
                    _refuse(name, block, f"expert {e} has no Linear '{n}'")
                if linear.bias is not None:
                    _refuse(name, block, f"expert {e}'s '{n}' has a bias")
        spec.layout = "modules"
        spec.names = layout
        spec.num_experts = len(experts)
        spec.act = getattr(experts[0], "act_fn", None) or F.silu
    else:
        gate_up = getattr(experts, "gate_up_proj", None)
        down = getattr(experts, "down_proj", None)
        if not isinstance(gate_up, torch.Tensor) or \
                not isinstance(down, torch.Tensor):
            _refuse(name, block, "its experts module has neither a list of "
                    "expert MLPs nor stacked gate_up_proj / down_proj")
        if getattr(experts, "is_transposed", False) or any(
                getattr(experts, b, None) is not None
                for b in ("gate_up_proj_bias", "down_proj_bias")):
            _refuse(name, block, "its stacked experts are transposed or have "
                    "biases (the gpt-oss layout)")
        e, two_f, d = gate_up.shape if gate_up.dim() == 3 else (0, 0, 0)
        if gate_up.dim() != 3 or two_f % 2 or tuple(down.shape) != (
                e, d, two_f // 2):
            _refuse(name, block, f"stacked experts gate_up_proj "
                    f"{list(gate_up.shape)} and down_proj "
                    f"{list(down.shape)} are not [E, 2f, d] and [E, d, f]")
        spec.layout = "stacked"
        spec.num_experts = e
        spec.act = getattr(experts, "act_fn", None) or F.silu
    if spec.num_experts != num_router:
        _refuse(name, block, f"the router scores {num_router} experts, the "
                f"block has {spec.num_experts}")
    if top_k > spec.num_experts:
        _refuse(name, block, f"top_k {top_k} > {spec.num_experts} experts")
    _recognise_groups(name, block, spec, method)
    spec.shared = _first_attr([block], ("shared_expert", "shared_experts"))
    spec.shared_gate = getattr(block, "shared_expert_gate", None)
    return spec


def _recognise_groups(name, block, spec, method):
    """Group-limited routing (DeepSeek): the E experts in n_group groups of
    E / n_group, each token choosing its top-k experts among the topk_group
    groups of the highest group scores. The group score is the sum of the
    group's two highest scores (DeepSeek-V3, noaux_tc; where there is no
    topk_method) or its highest (DeepSeek-V2's group_limited_greedy);
    topk_method greedy is plain top-k."""
    gate = block.gate
    groups = _first_attr([block, gate], ("n_group", "num_group"))
    spec.groups, spec.topk_groups, spec.group_score = None, None, None
    # Normalised with an epsilon where DeepSeek's code adds one.
    spec.norm_eps = 1e-20 if spec.bias_owner is not None or (
        method is not None) or groups is not None else 0.0
    if groups is None or method == "greedy":
        return
    topk_groups = _first_attr([block, gate], ("topk_group",))
    e = spec.num_experts
    if not isinstance(groups, int) or groups <= 0 or e % groups:
        _refuse(name, block, f"n_group {groups!r} does not divide the "
                f"{e} experts into groups")
    if groups == 1:
        return
    if not isinstance(topk_groups, int) or not 1 <= topk_groups <= groups:
        _refuse(name, block, f"topk_group {topk_groups!r} is not in [1, "
                f"n_group ({groups})]")
    rule = "max" if method == "group_limited_greedy" else "top2"
    if rule == "top2" and e // groups < 2:
        _refuse(name, block, f"groups of {e // groups} expert: a group's "
                "score is the sum of its two highest")
    if spec.top_k > topk_groups * (e // groups):
        # The experts masked to 0 would be chosen, by ties the eager top-k
        # and dc.topk break differently.
        _refuse(name, block, f"top_k {spec.top_k} > the "
                f"{topk_groups * (e // groups)} experts of topk_group "
                f"({topk_groups}) groups")
    spec.groups, spec.topk_groups, spec.group_score = groups, topk_groups, rule


# -- the static-shape forward ----------------------------------------------------


def _router_logits(block, spec, hidden_states, x):
    """The router logits [T, E] of x, the block's input hidden_states
    flattened to [T, d]."""
    gate = block.gate
    if isinstance(gate, nn.Linear):
        return gate(x)
    # A router module is called, not only its weight read: transformers
    # 5.x collects the router logits for the auxiliary loss by a forward
    # hook on the router (its first result), which must see this call. Its
    # other results (its own top-k) are not used. It gets the block's input
    # as the block has it (DeepSeek-V2's gate unpacks [B, S, d]).
    experts = gate.weight.shape[0]
    if spec.router_logits is not False:
        routed = gate(hidden_states)
        logits = routed[0] if isinstance(routed, (tuple, list)) else routed
        spec.router_logits = isinstance(logits, torch.Tensor) and \
            logits.shape[-1] == experts and \
            logits.numel() == x.shape[0] * experts
        if spec.router_logits:
            return logits.reshape(x.shape[0], experts)
    # A router returning its own choice (transformers 4.x DeepSeek: the
    # indices and weights) is called once, on the check's data: its
    # routing would be traced and unused. Its logits, in f32 as it computes
    # them.
    bias = getattr(gate, "bias", None)
    return F.linear(x.float(), gate.weight.float(),
                    None if bias is None else bias.float())


def _route(spec, scores):
    """(weights [T, k] before renormalisation, chosen experts [T, k]) of the
    f32 scores [T, E]: their top-k, or with a correction bias and groups
    (DeepSeek) the top-k of the biased scores within the best groups and
    the unbiased scores there."""
    k = spec.top_k
    if spec.bias_owner is None and spec.groups is None:
        return torch.topk(scores, k, dim=-1)
    choice = scores
    if spec.bias_owner is not None:
        bias = getattr(spec.bias_owner, "e_score_correction_bias")
        choice = scores + bias.float()
    if spec.groups is not None:
        tokens, e, g = scores.shape[0], spec.num_experts, spec.groups
        grouped = choice.reshape(tokens, g, e // g)
        if spec.group_score == "top2":
            group_scores = torch.topk(grouped, 2, dim=-1)[0].sum(dim=-1)
        else:
            group_scores = grouped.amax(dim=-1)
        group_idx = torch.topk(group_scores, spec.topk_groups, dim=-1)[1]
        group_mask = torch.zeros_like(group_scores).scatter(1, group_idx, 1.0)
        score_mask = group_mask.unsqueeze(-1).expand(tokens, g, e // g) \
            .reshape(tokens, e)
        # The other groups' experts score 0, as DeepSeek's masked_fill.
        choice = choice.masked_fill(~score_mask.bool(), 0.0)
    ids = torch.topk(choice, k, dim=-1)[1]
    return scores.gather(1, ids), ids


def _expert_weights(block, spec):
    """(gate, up, down) stacked [E, f, d], [E, f, d], [E, d, f]; or
    (gate_up [E, 2f, d], None, down)."""
    if spec.layout == "stacked":
        return block.experts.gate_up_proj, None, block.experts.down_proj
    stack = lambda n: torch.stack([getattr(e, n).weight
                                   for e in block.experts])
    return tuple(stack(n) for n in spec.names)


def expert_capacity(capacity_factor, tokens, top_k, experts):
    """How many of a block call's tokens * top_k assignments one expert
    keeps: ceil(C T k / E)."""
    return math.ceil(capacity_factor * tokens * top_k / experts)


def static_forward(block, spec, hidden_states):
    """The block's output (and router logits where the block returns them)
    as static-shape ops; hidden_states [..., d]."""
    shape = hidden_states.shape
    x = hidden_states.reshape(-1, shape[-1])
    tokens, k = x.shape[0], spec.top_k
    logits = _router_logits(block, spec, hidden_states, x)
    if spec.scoring == "softmax":
        scores = F.softmax(logits, dim=-1, dtype=torch.float32)
    else:
        scores = torch.sigmoid(logits.float())
    weights, ids = _route(spec, scores)
    if spec.normalize:
        total = weights.sum(dim=-1, keepdim=True)
        if spec.norm_eps:
            total = total + spec.norm_eps
        weights = weights / total
    if spec.routed_scale != 1.0:
        weights = weights * spec.routed_scale
    # With a capacity, each expert keeps its first `capacity` assignments
    # in token order, then choice order; the dropped ones lie past
    # ends[E - 1], where the grouped products give their rows zeros (the
    # token keeps its residual and the shared expert's output).
    capacity = 0
    if spec.capacity_factor is not None:
        capacity = expert_capacity(spec.capacity_factor, tokens, k,
                                   spec.num_experts)
        spec.traced_capacity = (capacity, tokens * k)  # for the export's note
    order, ends = group_by_expert(ids, spec.num_experts, capacity)
    token = torch.div(order, k, rounding_mode="floor")
    rows = gather_rows(x, token)
    w_gate, w_up, w_down = _expert_weights(block, spec)
    if w_up is None:
        gate, up = grouped_mm(rows, w_gate, ends, True).chunk(2, dim=-1)
    else:
        gate = grouped_mm(rows, w_gate, ends, True)
        up = grouped_mm(rows, w_up, ends, True)
    y = grouped_mm(spec.act(gate) * up, w_down, ends, True)
    # Each sorted row's routing weight, applied in f32, rounded once.
    row_weight = gather_rows(weights.reshape(-1, 1), order)
    y = (y.float() * row_weight).to(x.dtype)
    out = scatter_add_rows(y, token, tokens)
    if spec.shared is not None:
        shared = spec.shared(x)
        if spec.shared_gate is not None:
            shared = torch.sigmoid(spec.shared_gate(x)) * shared
        out = out + shared
    out = out.reshape(shape)
    return (out, logits) if spec.returns_logits else out


# -- swapping the forwards while tracing -------------------------------------------


def find_blocks(model):
    """[(name, block, spec)] of the model's MoE blocks; an ExportError for
    one that looks like a block and is not recognised."""
    found, inside = [], []
    for name, module in model.named_modules():
        if any(name.startswith(p + ".") for p in inside):
            continue
        if looks_like_moe(module):
            found.append((name, module, recognise(name or "<model>", module)))
            inside.append(name)
    return found


def _tolerance(dtype):
    return 1e-4 if dtype == torch.float32 else 3e-2


def _relative_error(have, want):
    have, want = have.float(), want.float()
    return float((have - want).norm() / (want.norm() + 1e-30))


def _check_block(name, block, spec, args, kwargs, original):
    """Compares the original output of one call with static_forward on the
    same input; records whether the block returns router logits."""
    def refuse(why):
        raise ExportError(
            f"module '{name}' ({type(block).__name__}, forward at "
            f"{defined_at(block)}) is recognised as a mixture-of-experts "
            f"block, but {why}; dc_torch's static-shape form of it would "
            "compute something else (its routing or expert MLP differs from "
            "the recognised Mixtral / Qwen-MoE / DeepSeek math)")
    if len(args) != 1 or kwargs or not isinstance(args[0], torch.Tensor):
        refuse("it is called with other arguments than the hidden states")
    if isinstance(original, (tuple, list)):
        if len(original) != 2:
            refuse(f"it returns {len(original)} values (expected the "
                   "output, or the output and the router logits)")
        spec.returns_logits = True
        out, logits = original
    else:
        spec.returns_logits = False
        out, logits = original, None
    mine = static_forward(block, spec, args[0])
    my_out, my_logits = mine if spec.returns_logits else (mine, None)
    tol = _tolerance(args[0].dtype)
    if not isinstance(out, torch.Tensor) or out.shape != my_out.shape:
        refuse("its output's shape is not its input's")
    err = _relative_error(my_out, out)
    if not err <= tol:
        refuse(f"its output differs from the static-shape form's on the "
               f"export's data (relative error {err:.3g})")
    if logits is not None:
        if not isinstance(logits, torch.Tensor) or \
                logits.numel() != my_logits.numel():
            refuse("its second result is not the router logits")
        err = _relative_error(my_logits.reshape(logits.shape), logits)
        if not err <= tol:
            refuse(f"its router logits differ (relative error {err:.3g})")


def _check(model, blocks, tokens):
    """Runs the model once on the export's tokens (no grad), checking each
    block's static-shape forward against its own on the input it gets."""
    handles, errors = [], []

    def hook_for(name, block, spec):
        def hook(module, args, output):
            if errors:
                return
            try:
                _check_block(name, block, spec, args, {}, output)
            except ExportError as e:
                errors.append(e)
        return hook
    for name, block, spec in blocks:
        handles.append(block.register_forward_hook(hook_for(name, block,
                                                            spec)))
    try:
        with torch.no_grad():
            model(tokens)
    finally:
        for h in handles:
            h.remove()
    if errors:
        raise errors[0]


def _static_method(name, spec):
    """The forward a recognised block has while tracing."""
    def forward(self, hidden_states, *args, **kwargs):
        if args or kwargs:
            raise ExportError(
                f"module '{name}' ({type(self).__name__}, forward at "
                f"{defined_at(self)}) is a mixture-of-experts block called "
                "with other arguments than the hidden states; dc_torch's "
                "static-shape form of it takes the hidden states only")
        return static_forward(self, spec, hidden_states)
    return forward


@contextlib.contextmanager
def static_moe(model, tokens=None, capacity_factor=None):
    """Within: every recognised MoE block of `model` runs static_forward
    (see module doc). With `tokens`, each block is first checked against
    its own forward on the input these tokens give it (dropless: the
    blocks recognised are). With `capacity_factor` C, each block then
    keeps at most ceil(C T k / E) assignments per expert (the capacity of
    its dc.group_by_expert) while tracing."""
    if capacity_factor is not None and not capacity_factor > 0:
        raise ExportError(f"the MoE capacity factor must be positive, got "
                          f"{capacity_factor}")
    blocks = find_blocks(model)
    if not blocks:
        yield []
        return
    _ops()
    if tokens is not None:
        _check(model, blocks, tokens)
    saved = []
    for name, block, spec in blocks:
        spec.capacity_factor = capacity_factor
        if spec.returns_logits is None:  # not called by the check
            spec.returns_logits = spec.layout == "modules"
        saved.append((block, block.__dict__.get("forward")))

        block.forward = types.MethodType(_static_method(name, spec), block)
    try:
        yield blocks
    finally:
        for _, _, spec in blocks:
            spec.capacity_factor = None
        for block, previous in saved:
            if previous is None:
                del block.forward
            else:
                block.forward = previous
