"""export(): a model's training step as MLIR in dc's input contract
(docs/models.md), and its initial weights. trace.py captures the joint
graph, lower.py maps each ATen op; this file walks the graph and writes the
function's signature: trainable parameters (#dc.param with their names),
then non-trainable tensors (buffers, frozen parameters: #dc.param without a
gradient), then the token ids and targets (dc.name, dc.vocab); results:
the loss, then one gradient per trainable parameter."""

import operator

import torch

import dc_mlir
from . import lower
from .errors import ExportError, where
from .lower import DTYPES, Lowering, Value
from .mlir import Module, location
from .trace import capture, default_loss


class Exported:
    """The step's MLIR text and the weights (name -> tensor) it starts
    from, in argument order."""

    def __init__(self, mlir, weights, notes=()):
        self.mlir = mlir
        self.weights = weights
        # Lines for the user about choices the export made (a capacity).
        self.notes = list(notes)


def _vocab_of(model, vocab):
    """The vocabulary the token ids are drawn from: `vocab`, positive and
    at most the rows of the model's first nn.Embedding, else those rows."""
    rows = next((m.num_embeddings for m in model.modules()
                 if isinstance(m, torch.nn.Embedding)), None)
    if vocab is None:
        if rows is None:
            raise ExportError("cannot tell the vocabulary size (the model "
                              "has no nn.Embedding): pass vocab=")
        return rows
    if vocab <= 0:
        raise ExportError(f"vocab {vocab} must be positive (the token ids "
                          "are drawn from [0, vocab))")
    if rows is not None and vocab > rows:
        raise ExportError(f"vocab {vocab} is larger than the model's "
                          f"embedding of {rows} rows: token ids from {rows} "
                          "on would index outside it")
    return vocab


def _constant(m, node, tensor):
    """A small constant tensor as arith.constant (the GPU target makes it in
    the step: dc-compute-constants); a large one is an error: it would be a
    literal in the IR, not a weight."""
    numel = tensor.numel()
    if numel > lower.MAX_INLINE_CONSTANT:
        raise ExportError(
            f"a constant tensor of shape {list(tensor.shape)} ({numel} "
            f"elements) is captured by the trace, at {where(node)}; compute "
            "it in "
            "forward from torch.arange etc. (it is then recomputed in the "
            "IR), or register it as a buffer (a non-trainable argument)")
    elt = lower.element_type(tensor.dtype, node)
    flat = tensor.reshape(-1).tolist()
    if elt in ("f32", "bf16", "f16"):
        items = [dc_mlir.float_literal(float(v), elt) for v in flat]
    elif elt == "i1":
        items = ["true" if v else "false" for v in flat]
    else:
        items = [str(int(v)) for v in flat]
    body = items[0] if tensor.dim() == 0 else "[" + ", ".join(items) + "]"
    v = Value(m.fresh("const"), tuple(tensor.shape), elt)
    if tensor.dim() > 1:
        flat_v = Value(m.fresh("const"), (numel,), elt)
        m.emit(f"{flat_v.name} = arith.constant dense<{body}> : "
               f"{flat_v.type}")
        return m.reshape(flat_v, tensor.shape)
    m.emit(f"{v.name} = arith.constant dense<{body}> : {v.type}")
    return v


def _lower_graph(graph_module, m, inputs, placeholders_named):
    """Lowers every node; returns the Values of the output tuple."""
    L = Lowering(m)
    env = {}
    args_iter = iter(inputs)
    order = {n: i for i, n in enumerate(graph_module.graph.nodes)}

    def materialize(v):
        return v.materialize(m) if isinstance(v, lower.Transposed) else v
    for node in graph_module.graph.nodes:
        L.node = node
        grad_fn = node.meta.get("dc_grad_fn")
        m.loc = location(node.name, node.meta.get("dc_frame"),
                         f"backward: {grad_fn}" if grad_fn else
                         "backward" if node.meta.get("dc_backward") else None)
        if node.op == "placeholder":
            env[node] = next(args_iter)
            continue
        if node.op == "get_attr":
            env[node] = _constant(m, node, getattr(graph_module, node.target))
            continue
        if node.op == "output":
            return [materialize(env[a]) if a is not None else None
                    for a in node.args[0]]
        if node.op != "call_function":
            raise ExportError(f"{where(node)}: unexpected FX node kind "
                              f"'{node.op}'")

        key = lower.op_key(node.target)
        keep = key in lower.TAKES_TRANSPOSED

        def value(a):
            if isinstance(a, torch.fx.Node):
                return env[a] if keep else materialize(env[a])
            if isinstance(a, (list, tuple)):
                return type(a)(value(x) for x in a)
            return a
        args = [value(a) for a in node.args]
        kwargs = {k: value(v) for k, v in node.kwargs.items()}
        if node.target is operator.getitem:
            env[node] = args[0][args[1]]
            continue
        base_name = key.split(".")[0]
        if base_name in lower.RANDOM:
            raise ExportError(
                f"{key} draws random numbers in the step, at {where(node)}; "
                "dc exports steps with dropout off (p=0 in every dropout)")
        boolean_index = key == "index.Tensor" and any(
            isinstance(i, Value) and i.elt == "i1" for i in args[1])
        if base_name in lower.DATA_DEPENDENT or boolean_index:
            raise ExportError(
                f"dynamic shape: the result of {key} depends on the values "
                f"of its input, at {where(node)}; dc needs static shapes")
        base = lower.in_place_base(key)
        if base:
            target = node.args[0]
            if target.op == "placeholder":
                raise ExportError(
                    "the model updates "
                    f"{placeholders_named.get(target.name, target.name)} in "
                    f"place, at {where(node)}; a dc training step is a pure function of its "
                    "parameters and data, so state that changes in training "
                    "(running statistics, counters, caches) cannot be "
                    "exported; keep it out of the step or make it a "
                    "parameter")
            if base not in lower.OPS:
                raise ExportError(f"{where(node)}: unsupported in-place op "
                                  f"{key}")
            view_of = lambda n: isinstance(n, torch.fx.Node) and \
                n.op == "call_function" and \
                lower.op_key(n.target).split(".")[0] in lower.VIEWS
            # A view taken after the update reads the rebound value: fine.
            earlier_views = [u for u in target.users
                             if view_of(u) and order[u] < order[node]]
            if view_of(target) or earlier_views:
                raise ExportError(
                    f"{where(node)}: an in-place update of a tensor that "
                    "shares memory with a view (x[...] = v, x.view(...)."
                    "add_(...)) is not supported; write it out of place "
                    "(torch.where, torch.cat)")
            result = lower.OPS[base](L, node, args, kwargs)
            env[target] = result  # later uses see the updated value
            env[node] = result
            continue
        empty = lower.empty_result(node)
        if empty is not None:  # no elements: nothing to compute
            env[node] = m.empty(*empty)
            continue
        if key not in lower.OPS:
            raise ExportError(
                f"unsupported ATen op {key} at {where(node)}; "
                "docs/frontend.md lists the supported ops")
        try:
            env[node] = lower.OPS[key](L, node, args, kwargs)
        except ExportError:
            raise
        except Exception as e:  # an op form the lowering does not handle
            raise ExportError(f"{where(node)}: cannot lower {key} with "
                              f"arguments {args}: {e}") from e
    raise ExportError("the traced graph has no output")


def export(model, batch, seq, dtype="f32", loss_fn=default_loss,
           vocab=None, name="train_step", aux_loss_coef=None,
           moe_capacity_factor=None):
    """Traces one training step of `model` (tokens [batch, seq] -> logits;
    `loss_fn(logits, targets)` -> scalar loss) and returns an Exported.

    Where the model's output has an `aux_loss` (a Hugging Face MoE model
    with output_router_logits on), the step's loss adds `aux_loss_coef *
    aux_loss`, as the model's own forward does with labels; None takes
    the model's router_aux_loss_coef, 0 leaves it out (trace.step_loss).
    `moe_capacity_factor` C: every MoE block keeps at most ceil(C T k / E)
    of its T k assignments per expert (dc.group_by_expert's capacity);
    None (the default) is dropless, the model's own routing."""
    if batch <= 0 or seq <= 0:
        raise ExportError(f"batch {batch} and seq {seq} must be positive "
                          "(dc needs static shapes)")
    torch_dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[dtype]
    model = model.to(torch_dtype)
    vocab = _vocab_of(model, vocab)
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, vocab, (batch, seq), generator=g)
    targets = torch.randint(0, vocab, (batch, seq), generator=g)
    graph_module, params = capture(model, tokens, targets, loss_fn,
                                   aux_loss_coef, moe_capacity_factor)

    m = Module()
    inputs, signature, named = [], [], {}
    tensors = params.trainable + params.frozen
    for i, (pname, t) in enumerate(tensors):
        elt = DTYPES.get(t.dtype)
        if elt is None:
            raise ExportError(f"parameter '{pname}' has dtype {t.dtype}")
        v = Value(m.fresh(pname.replace(".", "_")), tuple(t.shape), elt)
        inputs.append(v)
        kind = "parameter" if i < len(params.trainable) else "buffer"
        named[f"args_{i}"] = f"{kind} '{pname}'"
        signature.append(dc_mlir.param_arg(v, i, pname))
    for data in ("tokens", "targets"):
        v = Value(m.fresh(data), (batch, seq), "i32")
        inputs.append(v)
        signature.append(dc_mlir.vocab_arg(v, vocab, data))
    placeholders = [n for n in graph_module.graph.nodes
                    if n.op == "placeholder"]
    named = {n.name: named.get(f"args_{i}", n.name)
             for i, n in enumerate(placeholders)}
    outputs = _lower_graph(graph_module, m, inputs, named)
    m.loc = None
    loss, grads = outputs[0], outputs[1:]
    results = [dc_mlir.LOSS_RESULT]
    returned = [loss.name]
    L = Lowering(m)
    for i, ((pname, t), g) in enumerate(zip(params.trainable, grads)):
        g = L.cast(g, inputs[i].elt)
        returned.append(g.name)
        results.append(dc_mlir.grad_result(inputs[i].type, i))
    types = [dc_mlir.tensor_type((), "f32")] + [
        inputs[i].type for i in range(len(grads))]
    m.emit(f"return {', '.join(returned)} : {', '.join(types)}")

    count = sum(t.numel() for _, t in params.trainable)
    out = [f"// dc_torch export of {type(model).__name__}: batch {batch}, "
           f"seq {seq}, {dtype}, vocab {vocab}",
           f"// parameters: {count} in {len(params.trainable)} tensors"
           + (f", {len(params.frozen)} non-trainable" if params.frozen
              else "")]
    out += m.function(name, signature, results)
    notes = []
    capacities = getattr(graph_module, "dc_moe_capacities", [])
    if capacities:
        capacity, assignments = capacities[0][1]
        same = all(c == capacities[0][1] for _, c in capacities)
        notes.append(
            f"MoE capacity factor {moe_capacity_factor}: each expert keeps "
            + (f"at most {capacity} of the {assignments} assignments of "
               f"each of the {len(capacities)} MoE blocks" if same else
               "at most " + ", ".join(f"{c} of {a} ('{n}')"
                                      for n, (c, a) in capacities))
            + ", in token order then choice order; the others are dropped "
            "(the model's own forward drops none)")
        out.insert(2, "// " + notes[-1])
    elif moe_capacity_factor is not None:
        notes.append(f"MoE capacity factor {moe_capacity_factor}: the model "
                     "has no mixture-of-experts block, nothing to drop")
    weights = {pname: t.detach() for pname, t in tensors}
    return Exported("\n".join(out) + "\n", weights, notes)
