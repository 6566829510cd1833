"""Captures a model's training step as one joint FX graph of ATen ops:
forward, loss and torch.autograd.grad traced together by make_fx (what
AOTAutograd does for torch.compile), with torch's decompositions of the
composite ops (softmax, layer norm, GELU, ... and their backwards) into
the basic ones lower.py maps to MLIR."""

import contextlib
import inspect
import linecache
import os
import sys

import torch
import torch.fx
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

from .attention import fused_attention
from .errors import ExportError
from .moe import static_moe

aten = torch.ops.aten

# Composite ops decomposed by torch's own table (names absent in a torch
# version are skipped).
DECOMPOSED = [
    "_log_softmax", "_log_softmax_backward_data", "_softmax",
    "_softmax_backward_data", "native_layer_norm", "native_layer_norm_backward",
    "gelu", "gelu_backward", "silu", "silu_backward", "sigmoid_backward",
    "tanh_backward", "masked_fill", "unbind",
    "t", "transpose", "rsub", "detach", "addmm", "rms_norm",
    "_fused_rms_norm", "logsumexp", "std", "var", "outer",
]


def decompositions():
    from torch._decomp import get_decompositions
    ops = [getattr(aten, name) for name in DECOMPOSED if hasattr(aten, name)]
    return get_decompositions(ops)


class StepParameters:
    """The model's tensors by role. Trainable parameters are unique tensors
    (tied weights once, under their first name, with every alias
    remembered); buffers and frozen parameters are non-trainable inputs."""

    def __init__(self, model):
        self.trainable = []   # (name, tensor)
        self.frozen = []      # (name, tensor): buffers, requires_grad=False
        self.aliases = {}     # every name -> (list, index)
        seen = {}
        for name, tensor, is_buffer in _named_tensors(model):
            if tensor is None:
                continue
            if id(tensor) in seen:
                self.aliases[name] = seen[id(tensor)]
                continue
            trainable = not is_buffer and tensor.requires_grad
            group = self.trainable if trainable else self.frozen
            group.append((name, tensor))
            seen[id(tensor)] = self.aliases[name] = (
                "trainable" if trainable else "frozen", len(group) - 1)

    def mapping(self, trainable, frozen):
        """Every name (aliases too) to its tensor among the given ones."""
        lists = {"trainable": trainable, "frozen": frozen}
        return {name: lists[kind][i]
                for name, (kind, i) in self.aliases.items()}


def _named_tensors(model, prefix=""):
    """Parameters and buffers of every submodule, without dropping the
    duplicates named_parameters() drops (a tied weight has two names)."""
    for name, p in model._parameters.items():
        yield prefix + name, p, False
    for name, b in model._buffers.items():
        yield prefix + name, b, True
    for name, child in model._modules.items():
        if child is not None:
            yield from _named_tensors(child, prefix + name + ".")


def _functional_call(model, tensors, args):
    try:
        from torch.func import functional_call
        return functional_call(model, tensors, args, tie_weights=False)
    except ImportError:
        from torch.nn.utils.stateless import functional_call
        return functional_call(model, tensors, args)


_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_OWN_DIR = os.path.dirname(__file__) + os.sep


class _SourceRecorder:
    """Stamps every FX node created while tracing with the innermost frame
    of the user's code (not torch's, not dc_torch's), and marks the nodes
    traced inside torch.autograd.grad as backward."""

    def __init__(self):
        self.in_backward = False

    def frame(self):
        f = sys._getframe(2)
        while f is not None:
            file = f.f_code.co_filename
            if not (file.startswith(_TORCH_DIR) or file.startswith(_OWN_DIR)
                    or file.startswith("<")):
                source = linecache.getline(file, f.f_lineno).strip()
                return (file, f.f_lineno, f.f_code.co_name, source)
            f = f.f_back
        return None

    @contextlib.contextmanager
    def installed(self):
        base = torch.fx.proxy.TracerBase
        original = base.create_node
        recorder = self

        def create_node(self, *args, **kwargs):
            node = original(self, *args, **kwargs)
            if recorder.in_backward:
                node.meta["dc_backward"] = True
                # Which backward function traced it (torch 2.x), e.g.
                # PowBackward0: names the forward op it differentiates.
                current = getattr(torch._C, "_current_autograd_node", None)
                grad_fn = current() if current else None
                if grad_fn is not None:
                    node.meta["dc_grad_fn"] = grad_fn.name()
            else:
                node.meta["dc_frame"] = recorder.frame()
            return node

        base.create_node = create_node
        try:
            yield
        finally:
            base.create_node = original


def default_loss(logits, targets):
    """Next-token cross-entropy in f32, mean over the tokens whose target
    is not -100."""
    return torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1).long(),
        ignore_index=-100)


def aux_loss_coefficient(model):
    """The weight of the auxiliary (load-balancing) loss where the model
    names one as Hugging Face's MoE models do: `router_aux_loss_coef` on
    the model or its config; None where it names none."""
    for owner in (model, getattr(model, "config", None)):
        coef = getattr(owner, "router_aux_loss_coef", None)
        if coef is not None:
            return coef
    return None


def step_loss(output, targets, loss_fn=default_loss, aux_loss_coef=None,
              model=None, classes=None):
    """The step's loss from the model's output, the way Hugging Face's
    *ForCausalLM forward makes its `loss` from labels: loss_fn(logits,
    targets), plus `coef * output.aux_loss` where the output has an
    aux_loss (an MoE model returns one when its config's
    output_router_logits is on). `aux_loss_coef` None: the model's
    router_aux_loss_coef. `classes`: the token ids the targets may hold,
    which the logits' last dim must cover."""
    logits, aux = output, None
    # Hugging Face models return an output object, others a tuple.
    if hasattr(output, "logits"):
        logits, aux = output.logits, getattr(output, "aux_loss", None)
    elif isinstance(output, (tuple, list)):
        logits = output[0]
    # The default loss is cross-entropy over the last dim; another loss_fn
    # reads the output its own way.
    if loss_fn is default_loss and classes is not None and \
            isinstance(logits, torch.Tensor) and \
            (logits.dim() == 0 or logits.shape[-1] < classes):
        raise ExportError(
            f"the model's output has shape {list(logits.shape)}: a training "
            f"step needs logits whose last dim covers the {classes} token "
            "ids of the vocabulary (does the forward return hidden states "
            "instead of the LM head's output?)")
    loss = loss_fn(logits, targets)
    if isinstance(aux, torch.Tensor):
        coef = aux_loss_coef
        if coef is None and model is not None:
            coef = aux_loss_coefficient(model)
        if coef is None:
            raise ExportError(
                "the model's output has an aux_loss but the model names no "
                "router_aux_loss_coef (on itself or its config): pass "
                "aux_loss_coef= to export or --aux-loss-coef to the command "
                "line (0 leaves the auxiliary loss out)")
        if coef:
            loss = loss + coef * aux.to(loss.dtype)
    return loss


@contextlib.contextmanager
def static_one_hot():
    """Within: F.one_hot(x, num_classes) is `x[..., None] == arange(C)` as
    int64. ATen's one_hot reads min and max of its input on the host to
    check the classes (data-dependent, refused by make_fx); the comparison
    has the same values for classes in [0, C) and static shapes. An id
    outside [0, C) gives a row of zeros here where torch raises."""
    original = F.one_hot

    def one_hot(input, num_classes=-1):
        if num_classes is None or num_classes < 0:
            raise ExportError(
                "F.one_hot without num_classes takes its class count from "
                "the largest value in the data (a dynamic shape); pass "
                "num_classes")
        classes = torch.arange(num_classes, device=input.device)
        return (input.unsqueeze(-1) == classes).long()
    F.one_hot = one_hot
    try:
        yield
    finally:
        F.one_hot = original


def capture(model, tokens, targets, loss_fn=default_loss, aux_loss_coef=None,
            moe_capacity_factor=None):
    """The joint graph of one step: placeholders (trainable..., frozen...,
    tokens, targets), outputs (loss, grad of each trainable). The loss is
    step_loss's; moe_capacity_factor: see moe.static_moe."""
    params = StepParameters(model)
    if not params.trainable:
        raise ExportError("the model has no trainable parameters")
    n_train = len(params.trainable)
    classes = int(targets.max()) + 1 if targets.numel() else None
    recorder = _SourceRecorder()

    def step(*inputs):
        trainable = list(inputs[:n_train])
        frozen = list(inputs[n_train:-2])
        tok, tgt = inputs[-2:]
        output = _functional_call(model, params.mapping(trainable, frozen),
                                  (tok,))
        loss = step_loss(output, tgt, loss_fn, aux_loss_coef, model, classes)
        if loss.dim() != 0:
            raise ExportError(f"the loss must be a scalar, got shape "
                              f"{list(loss.shape)}")
        recorder.in_backward = True
        grads = torch.autograd.grad(loss, trainable, allow_unused=True)
        recorder.in_backward = False
        grads = [torch.zeros_like(p) if g is None else g
                 for p, g in zip(trainable, grads)]
        return (loss.float(), *grads)

    inputs = [t.detach().clone().requires_grad_() for _, t in params.trainable]
    inputs += [t.detach().clone() for _, t in params.frozen]
    inputs += [tokens, targets]
    # Python control flow on a tensor's value (`if (x == 0).all():`, as
    # Hugging Face's mask helpers do on position ids) reads the value on the
    # host. make_fx (torch 2.x) may read it from the real tensors it traces
    # with; _host_reads then accepts the read only where the value depends
    # on no input of the step (it is the same in every step) and drops it.
    options = {}
    if "_error_on_data_dependent_ops" in inspect.signature(make_fx).parameters:
        options["_error_on_data_dependent_ops"] = False
    # Mixture-of-experts blocks route tokens by their values: each
    # recognised block runs a static-shape form of itself (moe.py), first
    # checked against its own forward on these tokens.
    with fused_attention(), static_one_hot(), \
            static_moe(model, tokens, moe_capacity_factor) as moe_blocks, \
            recorder.installed():
        try:
            graph = make_fx(step, decomposition_table=decompositions(),
                            **options)(*inputs)
        except RuntimeError as e:
            if "value out of a tracing tensor" not in str(e):
                raise
            raise ExportError(
                "the model reads a tensor's value in Python while tracing "
                f"(data-dependent control flow), at {_user_frame(e)}; this "
                f"torch ({torch.__version__}) cannot read values while "
                "tracing (torch 2.x can, where the value depends on no input "
                "of the step): compute it with tensor ops (torch.where)") \
                from None
    _host_reads(graph, params, n_train)
    # (block name, (capacity, assignments)) of each MoE block traced with a
    # capacity: what the export says it dropped from.
    graph.dc_moe_capacities = [(name, spec.traced_capacity)
                               for name, _, spec in moe_blocks
                               if spec.traced_capacity]
    return graph, params


_SCALAR_READS = ("_local_scalar_dense", "item")


def _host_reads(graph_module, params, n_train):
    """Each value the model read on the host while tracing (a
    _local_scalar_dense node) is checked: one computed from a parameter, a
    buffer or the data is an error (the traced branch would hold for these
    example values only); one computed from constants alone (torch.arange)
    is the same in every step, so the read and the ops that fed only it are
    dropped."""
    from .errors import where
    graph = graph_module.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    names = ([f"parameter '{name}'" for name, _ in params.trainable]
             + [f"buffer '{name}'" for name, _ in params.frozen]
             + ["the tokens", "the targets"])
    role = dict(zip(placeholders, names))
    reads = [n for n in graph.nodes if n.op == "call_function"
             and getattr(n.target, "__name__", "").split(".")[0]
             in _SCALAR_READS]
    for read in reads:
        stack, seen = [read], set()
        while stack:
            n = stack.pop()
            if n in seen:
                continue
            seen.add(n)
            if n in role:
                raise ExportError(
                    f"the model reads the value of a tensor computed from "
                    f"{role[n]} in Python (data-dependent control flow), at "
                    f"{where(read)}; a dc step is one static graph for every "
                    "step's data: compute it with tensor ops (torch.where)")
            stack.extend(n.all_input_nodes)
    dead, erased = list(reads), set()
    while dead:
        n = dead.pop()
        if n in erased or n.users:
            continue
        inputs = n.all_input_nodes
        graph.erase_node(n)
        erased.add(n)
        dead.extend(i for i in inputs if i.op == "call_function")
    graph_module.recompile()


def _user_frame(error):
    """'file:line in function: source' of the innermost frame of the
    model's code in an exception's traceback."""
    found, tb = None, error.__traceback__
    while tb is not None:
        file = tb.tb_frame.f_code.co_filename
        if not (file.startswith(_TORCH_DIR) or file.startswith(_OWN_DIR)
                or file.startswith("<")):
            source = linecache.getline(file, tb.tb_lineno).strip()
            found = (f"model source {file}:{tb.tb_lineno} in "
                     f"{tb.tb_frame.f_code.co_name}: {source}")
        tb = tb.tb_next
    return found or "an unknown line"
