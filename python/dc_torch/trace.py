"""Captures a model's training step as one joint FX graph of ATen ops:
forward, loss and torch.autograd.grad traced together by make_fx (what
AOTAutograd does for torch.compile), with torch's decompositions of the
composite ops (softmax, layer norm, GELU, ... and their backwards) into
the basic ones lower.py maps to MLIR."""

import contextlib
import linecache
import os
import sys

import torch
import torch.fx
from torch.fx.experimental.proxy_tensor import make_fx

from .attention import fused_attention
from .errors import ExportError

aten = torch.ops.aten

# Composite ops decomposed by torch's own table (names absent in a torch
# version are skipped).
DECOMPOSED = [
    "_log_softmax", "_log_softmax_backward_data", "_softmax",
    "_softmax_backward_data", "native_layer_norm", "native_layer_norm_backward",
    "gelu", "gelu_backward", "silu", "silu_backward", "sigmoid_backward",
    "tanh_backward", "masked_fill", "split", "split_with_sizes", "unbind",
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


def capture(model, tokens, targets, loss_fn=default_loss):
    """The joint graph of one step: placeholders (trainable..., frozen...,
    tokens, targets), outputs (loss, grad of each trainable)."""
    params = StepParameters(model)
    if not params.trainable:
        raise ExportError("the model has no trainable parameters")
    n_train = len(params.trainable)
    recorder = _SourceRecorder()

    def step(*inputs):
        trainable = list(inputs[:n_train])
        frozen = list(inputs[n_train:-2])
        tok, tgt = inputs[-2:]
        logits = _functional_call(model, params.mapping(trainable, frozen),
                                  (tok,))
        # Hugging Face models return an output object, others a tuple.
        if hasattr(logits, "logits"):
            logits = logits.logits
        elif isinstance(logits, (tuple, list)):
            logits = logits[0]
        loss = loss_fn(logits, tgt)
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
    with fused_attention(), recorder.installed():
        graph = make_fx(step, decomposition_table=decompositions())(*inputs)
    return graph, params
