"""Maps the joint graph's ATen ops to MLIR on tensors (linalg, tensor,
arith, math, scf; dc.attention for the fused attention ops). One function
per op family; OPS at the end is the supported set (docs/frontend.md lists
it). Floats are computed in f32 inside every generic and rounded once to
the result type, as dc-gen-llama does."""

import math

import torch

from dc_mlir import FLOAT_TYPES, Value
from .errors import ExportError, where

aten = torch.ops.aten

DTYPES = {torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16",
          torch.int64: "i64", torch.int32: "i32", torch.bool: "i1"}

# Ops whose result shape depends on their input's values.
DATA_DEPENDENT = {"nonzero", "masked_select", "unique", "_unique2",
                  "unique_consecutive", "unique_dim", "masked_scatter"}

# Ops whose result aliases their input in torch (a view): an in-place
# update through one would have to update the other, which export's
# out-of-place rewrite does not do, so it refuses those updates.
VIEWS = {"view", "_unsafe_view", "_reshape_alias", "reshape", "slice",
         "select", "permute", "expand", "alias", "unsqueeze", "squeeze", "t",
         "transpose", "detach", "as_strided", "diagonal", "unfold", "split",
         "split_with_sizes", "unbind", "narrow", "view_as", "expand_as"}

# Ops that draw random numbers: dropout in training mode, mostly.
RANDOM = {"bernoulli", "bernoulli_", "native_dropout", "rand", "rand_like",
          "randn", "randn_like", "randint", "randint_like", "randperm",
          "uniform_", "normal_", "uniform", "normal"}

# Inline a constant tensor of at most this many elements; bigger ones are
# an error (compute them in the model, or register them as buffers).
MAX_INLINE_CONSTANT = 16


def element_type(dtype, node):
    if dtype not in DTYPES:
        raise ExportError(f"{where(node)} produces {dtype}, which dc does "
                          "not support (f32, bf16, f16, i64, i32, bool)")
    return DTYPES[dtype]


def result_info(node):
    """[(shape, elt)] of the node's tensor results, from trace metadata."""
    meta = node.meta.get("val", node.meta.get("tensor_meta"))
    # TensorMetadata is itself a namedtuple: a single result has a shape.
    metas = [meta] if hasattr(meta, "shape") else list(meta or [])
    info = []
    for m in metas:
        if m is None:
            info.append(None)
            continue
        shape = []
        for d in m.shape:
            if not isinstance(d, int):
                raise ExportError(
                    f"{where(node)} has the dynamic shape {list(m.shape)}: "
                    "dc needs static shapes (trace with concrete sizes)")
            shape.append(d)
        info.append((tuple(shape), element_type(m.dtype, node)))
    return info


def empty_result(node):
    """(shape, elt) of a node whose one tensor result has no elements (a
    zero-width slice, and whatever computes on it), else None."""
    meta = node.meta.get("val", node.meta.get("tensor_meta"))
    if not hasattr(meta, "shape") or not hasattr(meta, "dtype") or \
            0 not in tuple(meta.shape):
        return None
    (shape, elt), = result_info(node)
    return shape, elt


def compute_type(elt):
    return "f32" if elt in FLOAT_TYPES else elt


class Lowering:
    def __init__(self, module):
        self.m = module
        self.node = None

    def fail(self, why):
        raise ExportError(f"{where(self.node)}: {why}")

    # -- building blocks ------------------------------------------------------

    def pointwise(self, shape, out_elt, operands, fn, compute=None,
                  hint="ew", keep_bool=False):
        """An elementwise generic over `shape` with numpy broadcasting;
        operands are Values or Python numbers; fn(b, scalars) returns a
        (scalar, its type). Operands are converted to `compute` (default:
        out_elt's compute type), bool tensors kept as i1 with keep_bool."""
        rank = len(shape)
        compute = compute or compute_type(out_elt)
        tensors, maps, slots = [], [], []
        for x in operands:
            if isinstance(x, Value):
                exprs = []
                for i, d in enumerate(x.shape):
                    o = rank - x.rank + i
                    exprs.append("0" if d == 1 and shape[o] != 1 else f"d{o}")
                slots.append(("t", len(tensors), x.elt))
                tensors.append(x)
                maps.append(exprs)
            else:
                slots.append(("c", x, None))
        init = self.m.empty(shape, out_elt)
        out_map = [f"d{i}" for i in range(rank)]

        def body(b):
            args = []
            for kind, v, elt in slots:
                if kind == "c":
                    args.append(b.const(v, compute))
                elif elt == "i1" and keep_bool:
                    args.append(b.ins[v])
                else:
                    args.append(b.convert(b.ins[v], elt, compute))
            result, res_elt = fn(b, args)
            return [b.convert(result, res_elt, out_elt)]

        return self.m.generic(hint, tensors, maps, [init], [out_map],
                              ["parallel"] * rank, body)

    def reduce(self, x, dims, keepdim, kind, out_elt):
        """Sum or max over `dims`, accumulated in f32 (or x's integer
        type), rounded to out_elt; keepdim keeps the dims as size 1."""
        dims = sorted(d % x.rank for d in dims) if dims else list(
            range(x.rank))
        acc_elt = compute_type(x.elt)
        kept = [i for i in range(x.rank) if i not in dims]
        init_value = 0.0 if kind == "sum" else -math.inf
        acc = self.m.filled([x.shape[i] for i in kept], acc_elt,
                            init_value if acc_elt in FLOAT_TYPES else 0)

        def body(b):
            v = b.convert(b.ins[0], x.elt, acc_elt)
            if kind == "sum":
                op = "arith.addf" if acc_elt in FLOAT_TYPES else "arith.addi"
            else:
                op = "arith.maximumf"
            return [b(f"{op} {v}, {b.outs[0]} : {acc_elt}")]

        iters = ["reduction" if i in dims else "parallel"
                 for i in range(x.rank)]
        r = self.m.generic(f"{kind}", [x], [[f"d{i}" for i in range(x.rank)]],
                           [acc], [[f"d{i}" for i in kept]], iters, body)
        if out_elt != acc_elt:
            r = self.cast(r, out_elt)
        if keepdim:
            r = self.m.reshape(r, [1 if i in dims else x.shape[i]
                                   for i in range(x.rank)])
        return r

    def cast(self, x, elt):
        if x.elt == elt:
            return x
        src = compute_type(x.elt)
        return self.pointwise(x.shape, elt, [x], lambda b, a: (a[0], src),
                              compute=src, hint="cast")

    def full(self, shape, elt, value):
        if elt == "i1":
            value = int(bool(value))
        return self.m.filled(shape, elt, value if elt in FLOAT_TYPES
                             else int(value))

    def broadcast_to(self, x, shape):
        return self.pointwise(shape, x.elt, [x], lambda b, a: (a[0], x.elt),
                              compute=x.elt, hint="expand")


# -- op families ----------------------------------------------------------------
# Each takes (L, node, args, kwargs) with FX inputs already replaced by
# Values (tensors) or Python values, and returns a Value (or a tuple).

def _arith(compute, op):
    f = compute in FLOAT_TYPES
    return {"add": "arith.addf" if f else "arith.addi",
            "sub": "arith.subf" if f else "arith.subi",
            "mul": "arith.mulf" if f else "arith.muli",
            "div": "arith.divf" if f else "arith.divsi"}[op]


def binary(op):
    def lower(L, node, args, kwargs):
        (shape, elt), = result_info(node)
        a, b = args[0], args[1]
        alpha = kwargs.get("alpha", args[2] if len(args) > 2 else 1)
        compute = compute_type(elt)
        if elt == "i1":
            L.fail("arithmetic on bool tensors")
        # x * 1 and x / 1 (addmm's decomposition scales by beta = alpha = 1)
        if op in ("mul", "div") and not isinstance(b, Value) and b == 1 \
                and isinstance(a, Value) and a.shape == tuple(shape) \
                and a.elt == elt:
            return a

        def fn(bb, s):
            x, y = s
            if alpha != 1:
                y = bb(f"{_arith(compute, 'mul')} {y}, "
                       f"{bb.const(alpha, compute)} : {compute}")
            return bb(f"{_arith(compute, op)} {x}, {y} : {compute}"), compute
        return L.pointwise(shape, elt, [a, b], fn, hint=op)
    return lower


def unary(expr):
    """expr(b, x) on an f32 scalar."""
    def lower(L, node, args, kwargs):
        (shape, elt), = result_info(node)
        if elt not in FLOAT_TYPES:
            L.fail(f"needs a float tensor, got {elt}")
        return L.pointwise(shape, elt, [args[0]],
                           lambda b, s: (expr(b, s[0]), "f32"),
                           hint=node.target.__name__.split(".")[0])
    return lower


def _sigmoid(b, x):
    one = b.const(1.0)
    e = b(f"math.exp {b(f'arith.negf {x} : f32')} : f32")
    return b(f"arith.divf {one}, {b(f'arith.addf {one}, {e} : f32')} : f32")


UNARY = {
    "neg": lambda b, x: b(f"arith.negf {x} : f32"),
    "exp": lambda b, x: b(f"math.exp {x} : f32"),
    "log": lambda b, x: b(f"math.log {x} : f32"),
    "cos": lambda b, x: b(f"math.cos {x} : f32"),
    "sin": lambda b, x: b(f"math.sin {x} : f32"),
    "tanh": lambda b, x: b(f"math.tanh {x} : f32"),
    "sqrt": lambda b, x: b(f"math.sqrt {x} : f32"),
    "rsqrt": lambda b, x: b(f"math.rsqrt {x} : f32"),
    "erf": lambda b, x: b(f"math.erf {x} : f32"),
    "abs": lambda b, x: b(f"math.absf {x} : f32"),
    "reciprocal": lambda b, x: b(f"arith.divf {b.const(1.0)}, {x} : f32"),
    "sigmoid": _sigmoid,
    "relu": lambda b, x: b(f"arith.maximumf {x}, {b.const(0.0)} : f32"),
}


def pow_(L, node, args, kwargs):
    (shape, elt), = result_info(node)
    base, exponent = args[0], args[1]
    if not isinstance(exponent, Value) and exponent == 2:
        return L.pointwise(shape, elt, [base], lambda b, s: (
            b(f"arith.mulf {s[0]}, {s[0]} : f32"), "f32"), hint="square")
    return L.pointwise(shape, elt, [base, exponent], lambda b, s: (
        b(f"math.powf {s[0]}, {s[1]} : f32"), "f32"), hint="pow")


def compare(pred):
    def lower(L, node, args, kwargs):
        (shape, _), = result_info(node)
        ops = [a for a in args[:2]]
        elts = [a.elt for a in ops if isinstance(a, Value)]
        floats = any(e in FLOAT_TYPES for e in elts) or any(
            isinstance(a, float) for a in ops)
        compute = "f32" if floats else next(
            (e for e in elts if e != "i1"), "i64")
        f = {"gt": ("ogt", "sgt"), "ge": ("oge", "sge"), "lt": ("olt", "slt"),
             "le": ("ole", "sle"), "eq": ("oeq", "eq"),
             "ne": ("une", "ne")}[pred]

        def fn(b, s):
            if floats:
                return b(f"arith.cmpf {f[0]}, {s[0]}, {s[1]} : f32"), "i1"
            return b(f"arith.cmpi {f[1]}, {s[0]}, {s[1]} : {compute}"), "i1"
        return L.pointwise(shape, "i1", ops, fn, compute=compute, hint=pred)
    return lower


def logical_not(L, node, args, kwargs):
    (shape, elt), = result_info(node)
    if elt != "i1":
        L.fail("needs a bool tensor")
    return L.pointwise(shape, "i1", [args[0]], lambda b, s: (
        b(f"arith.xori {s[0]}, {b.const(True, 'i1')} : i1"), "i1"),
        compute="i1", keep_bool=True, hint="not")


def logical(op):
    """and / or / xor of bool tensors (masks: a sliding window is causal
    and within reach); of integer tensors, bitwise."""
    def lower(L, node, args, kwargs):
        (shape, elt), = result_info(node)
        if elt not in ("i1", "i32", "i64"):
            L.fail(f"needs bool or integer tensors, got {elt}")
        operands = [a if isinstance(a, Value) else int(a) for a in args[:2]]
        return L.pointwise(shape, elt, operands, lambda b, s: (
            b(f"arith.{op}i {s[0]}, {s[1]} : {elt}"), elt),
            compute=elt, keep_bool=True, hint=op)
    return lower


def where_(L, node, args, kwargs):
    (shape, elt), = result_info(node)
    compute = compute_type(elt)
    return L.pointwise(shape, elt, list(args[:3]), lambda b, s: (
        b(f"arith.select {s[0]}, {s[1]}, {s[2]} : {compute}"), compute),
        keep_bool=True, hint="where")


def threshold_backward(L, node, args, kwargs):
    """ReLU's backward: the gradient where the input is above the
    threshold, else 0."""
    (shape, elt), = result_info(node)
    grad, x, threshold = args[0], args[1], args[2]

    def fn(b, s):
        above = b(f"arith.cmpf ogt, {s[1]}, {b.const(threshold)} : f32")
        return b(f"arith.select {above}, {s[0]}, {b.const(0.0)} : f32"), "f32"
    return L.pointwise(shape, elt, [grad, x], fn, hint="relu_grad")


# -- reductions -----------------------------------------------------------------

def sum_(L, node, args, kwargs):
    (_, elt), = result_info(node)
    x = args[0]
    dims = args[1] if len(args) > 1 else kwargs.get("dim")
    keep = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
    if x.elt == "i1":
        x = L.cast(x, "i64")
    return L.reduce(x, dims, keep, "sum", elt)


def mean_(L, node, args, kwargs):
    (shape, elt), = result_info(node)
    x = args[0]
    dims = args[1] if len(args) > 1 else kwargs.get("dim")
    keep = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
    dims = list(dims) if dims else list(range(x.rank))
    count = math.prod(x.shape[d % x.rank] for d in dims)
    s = L.reduce(x, dims, keep, "sum", "f32")
    return L.pointwise(shape, elt, [s], lambda b, v: (
        b(f"arith.mulf {v[0]}, {b.const(1.0 / count)} : f32"), "f32"),
        hint="mean")


def amax(L, node, args, kwargs):
    (_, elt), = result_info(node)
    dims = args[1] if len(args) > 1 else kwargs.get("dim", [])
    keep = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
    return L.reduce(args[0], dims, keep, "max", elt)


def var_mean(L, node, args, kwargs):
    x = args[0]
    dims = args[1] if len(args) > 1 else kwargs.get("dim")
    dims = [d % x.rank for d in dims] if dims else list(range(x.rank))
    correction = kwargs.get("correction", 1)
    keep = kwargs.get("keepdim", False)
    vshape = [1 if i in dims else n for i, n in enumerate(x.shape)
              if keep or i not in dims]
    mshape, velt, melt = vshape, x.elt, x.elt
    count = math.prod(x.shape[d % x.rank] for d in dims)
    if count - correction <= 0:
        L.fail(f"variance of {count} elements with correction {correction}")
    s = L.reduce(x, dims, True, "sum", "f32")
    mean_keep = L.pointwise(s.shape, "f32", [s], lambda b, v: (
        b(f"arith.mulf {v[0]}, {b.const(1.0 / count)} : f32"), "f32"),
        hint="mean")

    def sq(b, v):
        d = b(f"arith.subf {v[0]}, {v[1]} : f32")
        return b(f"arith.mulf {d}, {d} : f32"), "f32"
    dev = L.pointwise(x.shape, "f32", [x, mean_keep], sq, hint="sqdev")
    ss = L.reduce(dev, dims, keep, "sum", "f32")
    var = L.pointwise(vshape, velt, [ss], lambda b, v: (
        b(f"arith.mulf {v[0]}, {b.const(1.0 / (count - correction))} : f32"),
        "f32"), hint="var")
    mean = L.cast(L.m.reshape(mean_keep, mshape), melt)
    return var, mean


# -- linear algebra ---------------------------------------------------------------

class Transposed:
    """A permute that swaps the last two dims of a matrix or a batch of
    them, not yet emitted: mm/bmm read its source through a transposed
    indexing map (no copy; nn.Linear's [out, in] weights are used this
    way), any other use emits the linalg.transpose once."""

    def __init__(self, source, perm):
        self.source, self.perm, self.value = source, perm, None

    def materialize(self, m):
        if self.value is None:
            self.value = m.transpose("transpose", self.source, self.perm)
        return self.value


def _matmul_operand(L, x):
    if isinstance(x, Transposed):
        return x.source, True
    return x, False


def mm(L, node, args, kwargs):
    (shape, elt), = result_info(node)
    (a, ta), (b, tb) = (_matmul_operand(L, x) for x in args[:2])
    return L.m.matmul("mm", a, b, L.full(shape, elt, 0.0), ta, tb)


def bmm(L, node, args, kwargs):
    (shape, elt), = result_info(node)
    (a, ta), (b, tb) = (_matmul_operand(L, x) for x in args[:2])
    return L.m.batch_matmul("bmm", a, b, L.full(shape, elt, 0.0), ta,
                            tb)


# -- shapes, views, slices -----------------------------------------------------------

def view(L, node, args, kwargs):
    (shape, _), = result_info(node)
    return L.m.reshape(args[0], shape)


def identity(L, node, args, kwargs):
    return args[0]


def permute(L, node, args, kwargs):
    x = args[0]
    perm = [d % len(args[1]) for d in args[1]]
    if isinstance(x, Transposed):  # a permute of a permute: one of them
        x, perm = x.source, [x.perm[p] for p in perm]
    if perm == list(range(x.rank)):
        return x
    if perm in ([1, 0], [0, 2, 1]):
        return Transposed(x, perm)
    return L.m.transpose("transpose", x, perm)


def expand(L, node, args, kwargs):
    (shape, _), = result_info(node)
    if tuple(shape) == args[0].shape:
        return args[0]
    return L.broadcast_to(args[0], shape)


def slice_(L, node, args, kwargs):
    """x[start:end:step] along dim; the end is implied by the traced result
    shape."""
    x = args[0]
    dim = args[1] if len(args) > 1 else 0
    start = args[2] if len(args) > 2 else None
    step = args[4] if len(args) > 4 else 1
    dim %= x.rank
    (shape, _), = result_info(node)
    start = 0 if start is None else start
    if start < 0:
        start += x.shape[dim]
    start = min(max(start, 0), x.shape[dim])
    if shape == x.shape:
        return x
    offsets = [0] * x.rank
    offsets[dim] = start
    strides = [1] * x.rank
    strides[dim] = step
    return L.m.extract_slice("slice", x, offsets, shape, strides)


def split_with_sizes(L, node, args, kwargs):
    """x.split([n0, n1, ...], dim): one slice per size (torch 2.x's own
    decomposition of split makes as_strided views)."""
    x, sizes = args[0], list(args[1])
    dim = (args[2] if len(args) > 2 else kwargs.get("dim", 0)) % x.rank
    parts, start = [], 0
    for size in sizes:
        shape = list(x.shape)
        shape[dim] = size
        offsets = [0] * x.rank
        offsets[dim] = start
        parts.append(x if size == x.shape[dim] else
                     L.m.extract_slice("slice", x, offsets, shape,
                                       [1] * x.rank))
        start += size
    return parts


def split(L, node, args, kwargs):
    """x.split(n, dim): slices of n along dim, the last one shorter."""
    x, size = args[0], args[1]
    dim = (args[2] if len(args) > 2 else kwargs.get("dim", 0)) % x.rank
    total = x.shape[dim]
    sizes = [min(size, total - i) for i in range(0, total, size)] or [0]
    return split_with_sizes(L, node, [x, sizes, dim], {})


def select(L, node, args, kwargs):
    x, dim, index = args[0], args[1] % args[0].rank, args[2]
    index %= x.shape[dim]
    sizes = list(x.shape)
    sizes[dim] = 1
    offsets = [0] * x.rank
    offsets[dim] = index
    (shape, _), = result_info(node)
    return L.m.reshape(
        L.m.extract_slice("slice", x, offsets, sizes, [1] * x.rank), shape)


def slice_backward(L, node, args, kwargs):
    grad, sizes, dim, start, end, step = args
    dim %= len(sizes)
    start = start + sizes[dim] if start < 0 else min(start, sizes[dim])
    zeros = L.full(sizes, grad.elt, 0.0)
    offsets = [0] * len(sizes)
    offsets[dim] = start
    strides = [1] * len(sizes)
    strides[dim] = step
    return L.m.insert_slice("inserted", grad, zeros, offsets, strides)


def select_backward(L, node, args, kwargs):
    grad, sizes, dim, index = args
    dim %= len(sizes)
    index %= sizes[dim]
    shape = list(sizes)
    shape[dim] = 1
    zeros = L.full(sizes, grad.elt, 0.0)
    offsets = [0] * len(sizes)
    offsets[dim] = index
    return L.m.insert_slice("inserted", L.m.reshape(grad, shape), zeros,
                            offsets)


def cat(L, node, args, kwargs):
    (shape, elt), = result_info(node)
    tensors = [t for t in args[0] if math.prod(t.shape) > 0]
    dim = (args[1] if len(args) > 1 else kwargs.get("dim", 0)) % len(shape)
    out = L.m.empty(shape, elt)
    offset = 0
    for t in tensors:
        offsets = [0] * len(shape)
        offsets[dim] = offset
        out = L.m.insert_slice("inserted", L.cast(t, elt), out, offsets)
        offset += t.shape[dim]
    return out


def cumsum(L, node, args, kwargs):
    """Running sums along `dim`: out[.., i, ..] = sum of x[.., j, ..] for
    j <= i, one reduction over j per output element (position ids from an
    attention mask: a row of a few thousand at most)."""
    x = args[0]
    dim = args[1] % x.rank
    (shape, elt), = result_info(node)
    acc_elt = compute_type(elt)
    init = L.full(shape, acc_elt, 0)
    r = x.rank

    def body(b):
        keep = b(f"arith.cmpi ule, {b.index(r)}, {b.index(dim)} : index")
        v = b.convert(b.ins[0], x.elt, acc_elt)
        v = b(f"arith.select {keep}, {v}, {b.const(0, acc_elt)} : {acc_elt}")
        return [b(f"{_arith(acc_elt, 'add')} {v}, {b.outs[0]} : {acc_elt}")]
    in_map = [f"d{r}" if i == dim else f"d{i}" for i in range(r)]
    out = L.m.generic("cumsum", [x], [in_map], [init],
                      [[f"d{i}" for i in range(r)]],
                      ["parallel"] * r + ["reduction"], body)
    return L.cast(out, elt)


# -- creation -------------------------------------------------------------------------

def full_like_value(value):
    def lower(L, node, args, kwargs):
        (shape, elt), = result_info(node)
        return L.full(shape, elt, value)
    return lower


def full(L, node, args, kwargs):
    (shape, elt), = result_info(node)
    value = args[-1] if node.target.__name__.startswith(
        ("full.", "new_full.")) else args[1]
    if isinstance(value, Value):
        L.fail("a fill value that is a tensor")
    return L.full(shape, elt, value)


def scalar_tensor(L, node, args, kwargs):
    (shape, elt), = result_info(node)
    return L.full(shape, elt, args[0])


def fill_value(L, node, args, kwargs):
    (shape, elt), = result_info(node)
    if isinstance(args[1], Value):
        return L.broadcast_to(L.cast(args[1], elt), shape)
    return L.full(shape, elt, args[1])


def arange(L, node, args, kwargs):
    (shape, elt), = result_info(node)
    name = node.target.__name__
    if name == "arange.default":
        start, step = 0, 1
    else:
        start = args[0]
        step = args[2] if len(args) > 2 else 1
    compute = compute_type(elt)

    def fn(b, s):
        i = b(f"arith.index_cast {b.index(0)} : index to i64")
        if compute in FLOAT_TYPES:
            i = b(f"arith.sitofp {i} : i64 to f32")
        v = b(f"{_arith(compute, 'mul')} {i}, {b.const(step, compute)} : "
              f"{compute}")
        return b(f"{_arith(compute, 'add')} {v}, {b.const(start, compute)} :"
                 f" {compute}"), compute
    return L.pointwise(shape, elt, [], fn, hint="arange")


def triangle(upper):
    def lower(L, node, args, kwargs):
        (shape, elt), = result_info(node)
        x = args[0]
        diagonal = args[1] if len(args) > 1 else kwargs.get("diagonal", 0)
        r = x.rank
        compute = compute_type(elt)

        def fn(b, s):
            i = b(f"arith.index_cast {b.index(r - 2)} : index to i64")
            j = b(f"arith.index_cast {b.index(r - 1)} : index to i64")
            d = b(f"arith.subi {j}, {i} : i64")
            pred = "sge" if upper else "sle"
            keep = b(f"arith.cmpi {pred}, {d}, {b.const(diagonal, 'i64')} :"
                     " i64")
            zero = b.const(0, compute) if compute != "i1" else b.const(
                False, "i1")
            return b(f"arith.select {keep}, {s[0]}, {zero} : {compute}"), \
                compute
        return L.pointwise(shape, elt, [x], fn, keep_bool=True,
                           compute=compute, hint="triu" if upper else "tril")
    return lower


def to_copy(L, node, args, kwargs):
    (shape, elt), = result_info(node)
    return L.cast(args[0], elt)


# -- embedding and the loss ------------------------------------------------------------

def _index(b, v, elt):
    return b(f"arith.index_cast {v} : {elt} to index")


def embedding(L, node, args, kwargs):
    weight, indices = args[0], args[1]
    (shape, elt), = result_info(node)
    r = indices.rank

    def body(b):
        row = _index(b, b.ins[0], indices.elt)
        col = b.index(r)
        return [b(f"tensor.extract {weight.name}[{row}, {col}] : "
                  f"{weight.type}")]
    init = L.m.empty(shape, elt)
    return L.m.generic("embedding", [indices], [[f"d{i}" for i in range(r)]],
                       [init], [[f"d{i}" for i in range(r + 1)]],
                       ["parallel"] * (r + 1), body)


def embedding_dense_backward(L, node, args, kwargs):
    """The scatter-add dE[tok[n]] += dh[n] as an scf.for over the tokens
    carrying an f32 table (docs/models.md explains the form)."""
    grad, indices, num_weights, padding_idx, by_freq = args[:5]
    if by_freq:
        L.fail("scale_grad_by_freq=True")
    (shape, elt), = result_info(node)
    dim = shape[1]
    n = math.prod(indices.shape)
    m = L.m
    flat_idx = m.reshape(indices, [n])
    rows = m.reshape(grad, [n, dim])
    table = L.full([num_weights, dim], "f32", 0.0)

    def add_row(i, acc):
        tok = m.scalar("tok_id", f"tensor.extract {flat_idx.name}[{i}] : "
                       f"{flat_idx.type}")
        row = m.scalar("row", f"arith.index_cast {tok} : {flat_idx.elt} to "
                       "index")
        g = m.extract_slice("grad_row", rows, [i, 0], [1, dim])
        a = m.extract_slice("acc_row", acc, [row, 0], [1, dim])
        skip = None
        if padding_idx is not None and padding_idx >= 0:
            skip = m.scalar("is_padding", f"arith.cmpi eq, {tok}, "
                            f"{m.scalar_const(padding_idx, flat_idx.elt)} : "
                            f"{flat_idx.elt}")

        def body(b):
            v = b.convert(b.ins[0], rows.elt, "f32")
            if skip:
                v = b(f"arith.select {skip}, {b.const(0.0)}, {v} : f32")
            return [b(f"arith.addf {b.outs[0]}, {v} : f32")]
        s = m.generic("sum_row", [g], [["d0", "d1"]], [a], [["d0", "d1"]],
                      ["parallel", "parallel"], body)
        return m.insert_slice("next", s, acc, [row, 0])

    out = m.for_loop("embedding_grad", n, table, add_row, "tok", "table")
    return L.cast(out, elt)


def _nll_args(L, args):
    x, target, weight, reduction, ignore = args[:5]
    if weight is not None:
        L.fail("class weights")
    if x.rank != 2 or target.rank != 1:
        L.fail(f"input {list(x.shape)} and target {list(target.shape)}: "
               "expected [N, C] and [N]")
    if reduction not in (1, 2):
        L.fail("reduction='none' (only 'mean' and 'sum' reduce to the "
               "scalar loss)")
    return x, target, reduction, ignore


def nll_loss_forward(L, node, args, kwargs):
    """-sum over kept rows of x[n, target[n]] (ignore_index rows dropped),
    over their count for 'mean'; also the count (total_weight)."""
    x, target, reduction, ignore = _nll_args(L, args)
    elt = x.elt
    t = target.elt

    def picked(b):
        tok = b.ins[0]
        valid = b(f"arith.cmpi ne, {tok}, {b.const(ignore, t)} : {t}")
        safe = b(f"arith.select {valid}, {tok}, {b.const(0, t)} : {t}")
        v = b(f"tensor.extract {x.name}[{b.index(0)}, {_index(b, safe, t)}]"
              f" : {x.type}")
        v = b.convert(v, x.elt, "f32")
        v = b(f"arith.select {valid}, {v}, {b.const(0.0)} : f32")
        one = b(f"arith.select {valid}, {b.const(1.0)}, {b.const(0.0)} : f32")
        return [b(f"arith.subf {b.outs[0]}, {v} : f32"),
                b(f"arith.addf {b.outs[1]}, {one} : f32")]
    zeros = [L.full([], "f32", 0.0) for _ in range(2)]
    total, count = L.m.generic("nll", [target], [["d0"]], zeros,
                               [[], []], ["reduction"], picked)
    if reduction == 1:
        total = L.pointwise([], "f32", [total, count], lambda b, s: (
            b(f"arith.divf {s[0]}, {s[1]} : f32"), "f32"), hint="nll_mean")
    return L.cast(total, elt), L.cast(count, elt)


def nll_loss_backward(L, node, args, kwargs):
    grad_out = args[0]
    x, target, reduction, ignore = _nll_args(L, args[1:6])
    total_weight = args[6]
    (shape, elt), = result_info(node)
    t = target.elt

    def fn(b, s):
        g, tok, tw = s
        valid = b(f"arith.cmpi ne, {tok}, {b.const(ignore, t)} : {t}")
        col = b(f"arith.index_cast {b.index(1)} : index to {t}")
        hit = b(f"arith.cmpi eq, {tok}, {col} : {t}")
        on = b(f"arith.andi {valid}, {hit} : i1")
        v = b(f"arith.negf {g} : f32")
        if reduction == 1:
            v = b(f"arith.divf {v}, {tw} : f32")
        return b(f"arith.select {on}, {v}, {b.const(0.0)} : f32"), "f32"

    init = L.m.empty(shape, elt)
    m = L.m

    def body(b):
        g = b.convert(b.ins[0], grad_out.elt, "f32")
        tok = b.ins[1]
        tw = b.convert(b.ins[2], total_weight.elt, "f32")
        r, r_elt = fn(b, [g, tok, tw])
        return [b.convert(r, r_elt, elt)]
    return m.generic("nll_grad", [grad_out, target, total_weight],
                     [[], ["d0"], []], [init], [["d0", "d1"]],
                     ["parallel", "parallel"], body)


# -- indexing along a dim: gather, scatter, top-k --------------------------------------

def _dim_arg(args, kwargs, pos, rank, default=None):
    d = args[pos] if len(args) > pos else kwargs.get("dim", default)
    return d % rank


def gather(L, node, args, kwargs):
    """out[.., i, ..] = x[.., index[.., i, ..], ..] along `dim`: one
    tensor.extract per element, the other coordinates the output's."""
    x, index = args[0], args[2]
    return L.m.gather("gather", x, index, _dim_arg(args, kwargs, 1, x.rank))


def scatter(reduce):
    """x.scatter(dim, index, src or value), and scatter_add: out = x, then
    out[.., index[.., j, ..], ..] = (or +=) src[.., j, ..]. A generic over
    the output's elements and j (a reduction): element e along `dim` takes
    the sources whose index is e (the last one where several are, which
    torch leaves unspecified; all of them summed for scatter_add). The
    index spans x in every other dim (topk's backward, one_hot)."""
    def lower(L, node, args, kwargs):
        x, index, src = args[0], args[2], args[3]
        dim = _dim_arg(args, kwargs, 1, x.rank)
        (shape, elt), = result_info(node)
        r = x.rank
        if index.rank != r or any(index.shape[i] != x.shape[i]
                                  for i in range(r) if i != dim):
            L.fail(f"an index {list(index.shape)} that does not span "
                   f"{list(x.shape)} outside dim {dim}")
        compute = compute_type(elt)
        at_j = [f"d{r}" if i == dim else f"d{i}" for i in range(r)]
        ins, maps = [index], [at_j]
        if isinstance(src, Value):
            ins.append(src)
            maps.append(at_j)

        def body(b):
            here = b(f"arith.index_cast {b.index(dim)} : index to "
                     f"{index.elt}")
            hit = b(f"arith.cmpi eq, {b.ins[0]}, {here} : {index.elt}")
            v = b.convert(b.ins[1], src.elt, compute) if isinstance(
                src, Value) else b.const(src, compute)
            acc = b.convert(b.outs[0], elt, compute)
            if reduce == "add":
                v = b(f"{_arith(compute, 'add')} {acc}, {v} : {compute}")
            v = b(f"arith.select {hit}, {v}, {acc} : {compute}")
            return [b.convert(v, compute, elt)]
        init = x if x.elt == elt else L.cast(x, elt)
        return L.m.generic("scatter", ins, maps, [init],
                           [[f"d{i}" for i in range(r)]],
                           ["parallel"] * r + ["reduction"], body)
    return lower


def topk(L, node, args, kwargs):
    """The k largest along the last dim, descending (dc.topk; ties: the
    lower index first); torch's indices are i64."""
    x, k = args[0], args[1]
    dim = _dim_arg(args, kwargs, 2, x.rank, -1)
    largest = args[3] if len(args) > 3 else kwargs.get("largest", True)
    if dim != x.rank - 1 or not largest:
        L.fail("topk of the smallest or along a dim other than the last")
    # (A tuple result carries no tensor metadata on torch 1.13.)
    return L.m.topk("topk", x, k, "i64")


def stack(L, node, args, kwargs):
    (shape, elt), = result_info(node)
    dim = _dim_arg(args, kwargs, 1, len(shape), 0)
    out = L.m.empty(shape, elt)
    for i, t in enumerate(args[0]):
        piece = list(t.shape)
        piece.insert(dim, 1)
        offsets = [0] * len(shape)
        offsets[dim] = i
        out = L.m.insert_slice("stacked", L.m.reshape(L.cast(t, elt), piece),
                               out, offsets)
    return out


def div_rounding(L, node, args, kwargs):
    """div(a, b, rounding_mode='floor' / 'trunc' / None) and floor_divide.
    Integer floor division as divsi with its correction (the quotient
    rounded toward -inf where the remainder's sign differs from b's), which
    lowers everywhere arith.floordivsi may not."""
    (shape, elt), = result_info(node)
    key = op_key(node.target)
    mode = "floor" if key.startswith("floor_divide") else kwargs.get(
        "rounding_mode", args[2] if len(args) > 2 else None)
    compute = compute_type(elt)
    floats = compute in FLOAT_TYPES

    def fn(b, s):
        a, d = s
        if floats:
            q = b(f"arith.divf {a}, {d} : f32")
            if mode == "floor":
                q = b(f"math.floor {q} : f32")
            elif mode == "trunc":
                q = b(f"arith.select {b(f'arith.cmpf olt, {q}, {b.const(0.0)} : f32')}, "
                      f"{b(f'math.ceil {q} : f32')}, {b(f'math.floor {q} : f32')} : f32")
            return q, "f32"
        q = b(f"arith.divsi {a}, {d} : {compute}")
        if mode != "floor":
            return q, compute
        zero = b.const(0, compute)
        rem = b(f"arith.remsi {a}, {d} : {compute}")
        inexact = b(f"arith.cmpi ne, {rem}, {zero} : {compute}")
        rem_neg = b(f"arith.cmpi slt, {rem}, {zero} : {compute}")
        d_neg = b(f"arith.cmpi slt, {d}, {zero} : {compute}")
        signs = b(f"arith.xori {rem_neg}, {d_neg} : i1")
        down = b(f"arith.andi {inexact}, {signs} : i1")
        one = b(f"arith.select {down}, {b.const(1, compute)}, {zero} : "
                f"{compute}")
        return b(f"arith.subi {q}, {one} : {compute}"), compute
    return L.pointwise(shape, elt, [args[0], args[1]], fn, hint="div")


# -- mixture of experts (moe.py's dc:: ops) --------------------------------------------

def group_by_expert(L, node, args, kwargs):
    ids, experts = args[0], args[1]
    capacity = args[2] if len(args) > 2 else kwargs.get("capacity", 0)
    return L.m.group_by_expert("grouped", ids, experts, capacity)


def gather_rows(L, node, args, kwargs):
    return L.m.gather_rows("rows", args[0], args[1])


def scatter_add_rows(L, node, args, kwargs):
    return L.m.scatter_add_rows("row_sums", args[0], args[1], args[2])


def grouped_mm(L, node, args, kwargs):
    x, w, ends, transpose_rhs = args
    return L.m.grouped_matmul("grouped_mm", x, w, ends, bool(transpose_rhs))


def grouped_weight_grad(L, node, args, kwargs):
    return L.m.grouped_weight_grad("grouped_dw", *args[:3])


# -- attention ----------------------------------------------------------------------

def attention(L, node, args, kwargs):
    q, k, v, causal, scale = args
    return L.m.attention("attn", q, k, v, scale, causal)


def attention_grad(L, node, args, kwargs):
    q, k, v, o, lse, do, causal, scale = args
    return tuple(L.m.attention_grad("attn", q, k, v, o, lse, do, scale,
                                    causal))


# -- the supported set ----------------------------------------------------------------

# Ops that take a Transposed operand as it is (the others see it emitted).
TAKES_TRANSPOSED = {"mm.default", "bmm.default", "permute.default"}

OPS = {
    "add.Tensor": binary("add"), "add.Scalar": binary("add"),
    "sub.Tensor": binary("sub"), "sub.Scalar": binary("sub"),
    "mul.Tensor": binary("mul"), "mul.Scalar": binary("mul"),
    "div.Tensor": binary("div"), "div.Scalar": binary("div"),
    "pow.Tensor_Scalar": pow_, "pow.Tensor_Tensor": pow_, "pow.Scalar": pow_,
    "where.self": where_, "threshold_backward.default": threshold_backward, "logical_not.default": logical_not,
    "bitwise_not.default": logical_not,
    "bitwise_and.Tensor": logical("and"), "bitwise_or.Tensor": logical("or"),
    "bitwise_xor.Tensor": logical("xor"), "logical_and.default": logical("and"),
    "logical_or.default": logical("or"), "logical_xor.default": logical("xor"),
    "bitwise_and.Scalar": logical("and"), "bitwise_or.Scalar": logical("or"),
    "sum.dim_IntList": sum_, "sum.default": sum_, "mean.dim": mean_,
    "mean.default": mean_, "amax.default": amax,
    "var_mean.correction": var_mean,
    "mm.default": mm, "bmm.default": bmm,
    "view.default": view, "_unsafe_view.default": view,
    "_reshape_alias.default": view, "reshape.default": view,
    "unsqueeze.default": view, "squeeze.dim": view, "squeeze.default": view,
    "squeeze.dims": view,
    "clone.default": identity, "alias.default": identity,
    "detach.default": identity, "contiguous.default": identity,
    "lift_fresh_copy.default": identity,
    "permute.default": permute, "expand.default": expand,
    "slice.Tensor": slice_, "select.int": select,
    "split.Tensor": split, "split_with_sizes.default": split_with_sizes,
    "slice_backward.default": slice_backward,
    "select_backward.default": select_backward, "cat.default": cat,
    "cumsum.default": cumsum,
    "ones.default": full_like_value(1), "zeros.default": full_like_value(0),
    "ones_like.default": full_like_value(1),
    "zeros_like.default": full_like_value(0),
    "empty.memory_format": full_like_value(0),
    "empty_like.default": full_like_value(0),
    "new_zeros.default": full_like_value(0),
    "new_ones.default": full_like_value(1),
    "new_empty.default": full_like_value(0),
    "full.default": full, "full_like.default": full,
    "new_full.default": full, "scalar_tensor.default": scalar_tensor,
    "fill.Scalar": fill_value, "fill.Tensor": fill_value,
    "zero.default": full_like_value(0),
    "arange.default": arange, "arange.start": arange,
    "arange.start_step": arange,
    "triu.default": triangle(True), "tril.default": triangle(False),
    "_to_copy.default": to_copy, "convert_element_type.default": to_copy,
    "to.dtype": to_copy,
    "embedding.default": embedding,
    "embedding_dense_backward.default": embedding_dense_backward,
    "nll_loss_forward.default": nll_loss_forward,
    "nll_loss_backward.default": nll_loss_backward,
    "attention.default": attention, "attention_grad.default": attention_grad,
    "gather.default": gather, "scatter.src": scatter(None),
    "scatter.value": scatter(None), "scatter_add.default": scatter("add"),
    "topk.default": topk, "stack.default": stack,
    "div.Tensor_mode": div_rounding, "div.Scalar_mode": div_rounding,
    "floor_divide.default": div_rounding, "floor_divide.Scalar": div_rounding,
    "group_by_expert.default": group_by_expert,
    "gather_rows.default": gather_rows,
    "scatter_add_rows.default": scatter_add_rows,
    "grouped_mm.default": grouped_mm,
    "grouped_weight_grad.default": grouped_weight_grad,
}
for _name, _expr in UNARY.items():
    OPS[f"{_name}.default"] = unary(_expr)
for _pred in ("gt", "ge", "lt", "le", "eq", "ne"):
    OPS[f"{_pred}.Tensor"] = OPS[f"{_pred}.Scalar"] = compare(_pred)


def op_key(target):
    """'add.Tensor' for aten.add.Tensor, 'attention.default' for
    dc.attention, 'convert_element_type.default' for the prims op."""
    name = getattr(target, "__name__", str(target))
    return name


def in_place_base(key):
    """'fill.Scalar' for 'fill_.Scalar'; None when not in-place."""
    base, _, overload = key.partition(".")
    if base.endswith("_") and not base.startswith("_"):
        return base[:-1] + "." + overload
    return None
