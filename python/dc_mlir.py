"""MLIR text of a training step in dc's input contract (docs/models.md),
shared by its two writers: dc_torch (PyTorch's joint graph) and
dc-gen-llama (a hand-derived Llama step). Stdlib only: dc-gen-llama runs
without torch, from the build tree and from an installed prefix.

It spells what both write: tensor types and float literals, the step's
signature (#dc.param arguments, data arguments named by dc.name, the
dc.loss and #dc.grad results), and statically shaped linalg / tensor / scf /
dc ops with fresh SSA names and scalar constants hoisted to the top of the
function. What to emit, and the
naming of intermediate values, is each writer's."""

import math

FLOAT_TYPES = ("f32", "bf16", "f16")


def tensor_type(shape, elt):
    return "tensor<" + "".join(f"{d}x" for d in shape) + elt + ">"


# Infinities and NaN as MLIR writes them: hex bit patterns of the type's
# width (-inf, +inf, NaN).
_SPECIAL_BITS = {"f32": ("0xFF800000", "0x7F800000", "0x7FC00000"),
                 "bf16": ("0xFF80", "0x7F80", "0x7FC0"),
                 "f16": ("0xFC00", "0x7C00", "0x7E00")}


def float_literal(value, elt="f32"):
    """An MLIR float literal of type `elt`: infinities and NaN as hex bit
    patterns of its width, and a '.' before any exponent."""
    if math.isinf(value):
        return _SPECIAL_BITS[elt][0 if value < 0 else 1]
    if math.isnan(value):
        return _SPECIAL_BITS[elt][2]
    text = repr(float(value))
    if "e" in text and "." not in text:
        text = text.replace("e", ".0e")
    return text


def affine_map(num_dims, results):
    """Results are loop dims (ints) or affine expressions of them (strings,
    e.g. "d0", "0", "1 - d3")."""
    dims = ", ".join(f"d{i}" for i in range(num_dims))
    res = ", ".join(r if isinstance(r, str) else f"d{r}" for r in results)
    return f"affine_map<({dims}) -> ({res})>"


# -- the step's signature -----------------------------------------------------

LOSS_RESULT = "tensor<f32> {dc.loss}"


def param_arg(value, param_id, name):
    """A parameter argument: its id in the #dc.param order and its name."""
    return (f"    {value.name}: {value.type} {{dc.param = #dc.param<"
            f"id = {param_id}, name = \"{name}\">}}")


def vocab_arg(value, vocab, name):
    """A data argument of token ids in [0, vocab), named `name` (dc.name:
    the artifact manifest's name for it, whatever its SSA name)."""
    return (f"    {value.name}: {value.type} {{dc.name = \"{name}\", "
            f"dc.vocab = {vocab} : i64}}")


def grad_result(param_type, param_id):
    """The gradient result of parameter `param_id` (of its type)."""
    return f"{param_type} {{dc.grad = #dc.grad<param = {param_id}>}}"


class Value:
    """An SSA tensor value."""

    def __init__(self, name, shape, elt):
        self.name, self.shape, self.elt = name, tuple(shape), elt

    @property
    def type(self):
        return tensor_type(self.shape, self.elt)

    @property
    def rank(self):
        return len(self.shape)


class Body:
    """The scalar region of one linalg.generic: block arguments `ins` and
    `outs`, and `b(rhs)` for each op. Each writer keeps the names it had
    before sharing this (ARGS, OP; Module's EMPTY, FILL), so that its
    output stays the same text."""

    ARGS = ("in", "out")
    OP = "s"

    def __init__(self, in_elts, out_elts):
        self.lines = []
        self.ins = [f"%{self.ARGS[0]}{i}" for i in range(len(in_elts))]
        self.outs = [f"%{self.ARGS[1]}{i}" for i in range(len(out_elts))]
        self.in_elts, self.out_elts = list(in_elts), list(out_elts)

    def __call__(self, rhs):
        name = f"%{self.OP}{len(self.lines)}"
        self.lines.append(f"{name} = {rhs}")
        return name

    def index(self, dim):
        return self(f"linalg.index {dim} : index")


class Module:
    """The body of one function under construction. A writer subclasses it
    for its Body, its names of tensor.empty and linalg.fill results
    (EMPTY, FILL), its scalar constants (scalar_const) and how it writes
    indexing maps (map_attr)."""

    Body = Body
    EMPTY = "empty"
    FILL = "fill"

    def __init__(self):
        self.lines = []
        self.names = set()
        self.constants = {}
        self.depth = 0  # nesting of the region being written (scf.for)

    # -- names, constants, maps -----------------------------------------------

    def fresh(self, hint):
        hint = "".join(c if c.isalnum() or c == "_" else "_" for c in hint)
        name, n = hint, 1
        while name in self.names:
            n += 1
            name = f"{hint}_{n}"
        self.names.add(name)
        return "%" + name

    def emit(self, line):
        self.lines.append("  " * (1 + self.depth) + line)

    def hoist(self, key, hint, rhs):
        """`%name = rhs` once per key, at the top of the function."""
        if key not in self.constants:
            self.constants[key] = (self.fresh(hint), rhs)
        return self.constants[key][0]

    def index_const(self, value):
        return self.hoist(("index", value), f"c{value}",
                          f"arith.constant {value} : index")

    def scalar_const(self, value, elt):
        text = float_literal(value, elt) if elt in FLOAT_TYPES else int(value)
        return self.hoist((elt, repr(value)), "cst",
                          f"arith.constant {text} : {elt}")

    def map_attr(self, num_dims, results):
        """How an op names its indexing map (written out here)."""
        return affine_map(num_dims, results)

    def scalar(self, hint, rhs):
        """One scalar op `%name = rhs` in the current region."""
        name = self.fresh(hint)
        self.emit(f"{name} = {rhs}")
        return name

    def function(self, name, args, results):
        """The function's lines: its signature (`args` and `results` as
        param_arg, vocab_arg, LOSS_RESULT, grad_result write them), the
        hoisted constants, the body."""
        out = [f"func.func @{name}(\n" + ",\n".join(args) + ")\n    -> (" +
               ",\n        ".join(results) + ") {"]
        out += [f"  {n} = {text}" for n, text in self.constants.values()]
        out += self.lines
        out.append("}")
        return out

    # -- tensor ops -----------------------------------------------------------

    def empty(self, shape, elt, hint=None):
        v = Value(self.fresh(hint or self.EMPTY), shape, elt)
        self.emit(f"{v.name} = tensor.empty() : {v.type}")
        return v

    def filled(self, shape, elt, value, hint=None):
        init = self.empty(shape, elt)
        v = Value(self.fresh(hint or self.FILL), shape, elt)
        self.emit(f"{v.name} = linalg.fill ins({self.scalar_const(value, elt)}"
                  f" : {elt}) outs({init.name} : {v.type}) -> {v.type}")
        return v

    def generic(self, hint, ins, in_maps, inits, out_maps, iterators, body):
        """linalg.generic over `ins` into `inits` (Values); the maps are
        result lists over len(iterators) loop dims (as affine_map takes
        them); `body(b)` returns the yielded scalars (of the inits' element
        types). Returns one Value per init."""
        n = len(iterators)
        b = self.Body([v.elt for v in ins], [v.elt for v in inits])
        yields = body(b)
        base = self.fresh(hint)
        if len(inits) == 1:
            lhs, names = base, [base]
        else:
            lhs = f"{base}:{len(inits)}"
            names = [f"{base}#{i}" for i in range(len(inits))]
        maps = ", ".join(self.map_attr(n, m)
                         for m in list(in_maps) + list(out_maps))
        its = ", ".join(f'"{t}"' for t in iterators)
        head = (f"{lhs} = linalg.generic {{indexing_maps = [{maps}], "
                f"iterator_types = [{its}]}}")
        if ins:
            head += (" ins(" + ", ".join(v.name for v in ins) + " : " +
                     ", ".join(v.type for v in ins) + ")")
        head += (" outs(" + ", ".join(v.name for v in inits) + " : " +
                 ", ".join(v.type for v in inits) + ") {")
        self.emit(head)
        args = [f"{a}: {v.elt}" for a, v in zip(b.ins, ins)]
        args += [f"{a}: {v.elt}" for a, v in zip(b.outs, inits)]
        self.emit(f"^bb0({', '.join(args)}):")
        for line in b.lines:
            self.emit("  " + line)
        self.emit(f"  linalg.yield {', '.join(yields)} : "
                  f"{', '.join(v.elt for v in inits)}")
        types = ", ".join(v.type for v in inits)
        self.emit("} -> " + (types if len(inits) == 1 else f"({types})"))
        results = [Value(nm, v.shape, v.elt) for nm, v in zip(names, inits)]
        return results if len(results) > 1 else results[0]

    def _contraction_maps(self, transposed, maps):
        """A named contraction's indexing_maps, written only when it reads
        an operand transposed (through the map instead of a copy)."""
        if not transposed:
            return ""
        num_dims = len(maps[2]) + 1
        return "indexing_maps = [" + ", ".join(
            self.map_attr(num_dims, m) for m in maps) + "] "

    def matmul(self, hint, a, b, acc=None, transpose_a=False,
               transpose_b=False):
        """acc + a @ b (linalg.matmul accumulates into its init; a zero one
        when acc is None)."""
        if acc is None:
            m = a.shape[1] if transpose_a else a.shape[0]
            n = b.shape[0] if transpose_b else b.shape[1]
            acc = self.filled([m, n], a.elt, 0.0)
        v = Value(self.fresh(hint), acc.shape, acc.elt)
        maps = self._contraction_maps(transpose_a or transpose_b, [
            [2, 0] if transpose_a else [0, 2],
            [1, 2] if transpose_b else [2, 1], [0, 1]])
        self.emit(f"{v.name} = linalg.matmul {maps}ins({a.name}, {b.name} : "
                  f"{a.type}, {b.type}) outs({acc.name} : {v.type}) -> "
                  f"{v.type}")
        return v

    def batch_matmul(self, hint, a, b, acc=None, transpose_a=False,
                     transpose_b=False):
        """Per-batch acc + a @ b on [batch, rows, cols] tensors, as
        matmul."""
        if acc is None:
            m = a.shape[2] if transpose_a else a.shape[1]
            n = b.shape[1] if transpose_b else b.shape[2]
            acc = self.filled([a.shape[0], m, n], a.elt, 0.0)
        v = Value(self.fresh(hint), acc.shape, acc.elt)
        maps = self._contraction_maps(transpose_a or transpose_b, [
            [0, 3, 1] if transpose_a else [0, 1, 3],
            [0, 2, 3] if transpose_b else [0, 3, 2], [0, 1, 2]])
        self.emit(f"{v.name} = linalg.batch_matmul {maps}ins({a.name}, "
                  f"{b.name} : {a.type}, {b.type}) outs({acc.name} : "
                  f"{v.type}) -> {v.type}")
        return v

    def transpose(self, hint, x, perm):
        init = self.empty([x.shape[p] for p in perm], x.elt)
        v = Value(self.fresh(hint), init.shape, x.elt)
        self.emit(f"{v.name} = linalg.transpose ins({x.name} : {x.type}) "
                  f"outs({init.name} : {v.type}) permutation = "
                  f"[{', '.join(map(str, perm))}]")
        return v

    @staticmethod
    def _groups(groups):
        return "[" + ", ".join(
            "[" + ", ".join(map(str, g)) + "]" for g in groups) + "]"

    def expand(self, hint, x, groups, shape):
        v = Value(self.fresh(hint), shape, x.elt)
        self.emit(f"{v.name} = tensor.expand_shape {x.name} "
                  f"{self._groups(groups)} output_shape "
                  f"[{', '.join(map(str, shape))}] : {x.type} into {v.type}")
        return v

    def collapse(self, hint, x, groups):
        shape = [math.prod(x.shape[i] for i in g) for g in groups]
        v = Value(self.fresh(hint), shape, x.elt)
        self.emit(f"{v.name} = tensor.collapse_shape {x.name} "
                  f"{self._groups(groups)} : {x.type} into {v.type}")
        return v

    def extract_slice(self, hint, x, offsets, sizes, strides=None):
        """Offsets are integers or SSA index values (strings)."""
        if 0 in sizes:  # no elements (a rotation's empty pass-through)
            return self.empty(sizes, x.elt)
        strides = strides or [1] * len(sizes)
        v = Value(self.fresh(hint), sizes, x.elt)
        self.emit(f"{v.name} = tensor.extract_slice {x.name}"
                  f"[{', '.join(map(str, offsets))}] "
                  f"[{', '.join(map(str, sizes))}] "
                  f"[{', '.join(map(str, strides))}] : {x.type} to {v.type}")
        return v

    def insert_slice(self, hint, src, dst, offsets, strides=None):
        if 0 in src.shape:
            return dst
        strides = strides or [1] * src.rank
        v = Value(self.fresh(hint), dst.shape, dst.elt)
        self.emit(f"{v.name} = tensor.insert_slice {src.name} into "
                  f"{dst.name}[{', '.join(map(str, offsets))}] "
                  f"[{', '.join(map(str, src.shape))}] "
                  f"[{', '.join(map(str, strides))}] : {src.type} into "
                  f"{dst.type}")
        return v

    def for_loop(self, hint, count, carried, body, iv_hint=None,
                 acc_hint=None):
        """scf.for %i = 0 to count carrying the tensor `carried`;
        `body(i, acc)` emits the loop body and returns the next value of the
        carried tensor (a Value). Returns the loop's result."""
        i = self.fresh(iv_hint or f"{hint}_i")
        acc = Value(self.fresh(acc_hint or f"{hint}_acc"), carried.shape,
                    carried.elt)
        v = Value(self.fresh(hint), carried.shape, carried.elt)
        self.emit(f"{v.name} = scf.for {i} = {self.index_const(0)} to "
                  f"{self.index_const(count)} step {self.index_const(1)} "
                  f"iter_args({acc.name} = {carried.name}) -> ({v.type}) {{")
        self.depth += 1
        nxt = body(i, acc)
        self.emit(f"scf.yield {nxt.name} : {nxt.type}")
        self.depth -= 1
        self.emit("}")
        return v

    # -- dc ops ---------------------------------------------------------------

    def attention(self, hint, q, k, v, scale, causal):
        """dc.attention on [B*H, S, Dh]; returns (o, lse)."""
        o = Value(self.fresh(hint), q.shape, q.elt)
        lse = Value(self.fresh(f"{hint}_lse"), q.shape[:-1], "f32")
        mask = " causal" if causal else ""
        self.emit(f"{o.name}, {lse.name} = dc.attention {q.name}, {k.name}, "
                  f"{v.name}{mask} scale = {float(scale)!r} : {q.type}, "
                  f"{k.type}, {v.type} -> {o.type}, {lse.type}")
        return o, lse

    def attention_grad(self, hint, q, k, v, o, lse, do, scale, causal):
        """dc.attention_grad of a dc.attention; returns (dq, dk, dv)."""
        grads = [Value(self.fresh(f"{hint}_{g}"), x.shape, x.elt)
                 for g, x in (("dq", q), ("dk", k), ("dv", v))]
        ins = (q, k, v, o, lse, do)
        mask = " causal" if causal else ""
        self.emit(f"{', '.join(g.name for g in grads)} = dc.attention_grad "
                  f"{', '.join(x.name for x in ins)}{mask} scale = "
                  f"{float(scale)!r} : {', '.join(x.type for x in ins)} -> "
                  f"{', '.join(g.type for g in grads)}")
        return grads

    # -- mixture-of-experts routing (DCExpertOps.td) --------------------------

    def topk(self, hint, scores, k, index_elt="i64"):
        """dc.topk along the last dim; returns (values, indices)."""
        shape = list(scores.shape[:-1]) + [k]
        values = Value(self.fresh(hint), shape, scores.elt)
        indices = Value(self.fresh(f"{hint}_indices"), shape, index_elt)
        self.emit(f"{values.name}, {indices.name} = dc.topk {scores.name} "
                  f"k = {k} : {scores.type} -> {values.type}, "
                  f"{indices.type}")
        return values, indices

    def gather(self, hint, source, index, dim):
        """torch.gather: out[.., i, ..] = source[.., index[.., i, ..], ..]
        along `dim`, of index's shape, one tensor.extract per element (the
        other coordinates the output's). A router's chosen experts' scores
        (dim 1 of [T, E] at the [T, k] indices)."""
        r = index.rank

        def body(b):
            coords = [b(f"arith.index_cast {b.ins[0]} : {index.elt} to "
                        "index") if i == dim else b.index(i)
                      for i in range(r)]
            return [b(f"tensor.extract {source.name}[{', '.join(coords)}] : "
                      f"{source.type}")]
        loops = list(range(r))
        return self.generic(hint, [index], [loops],
                            [self.empty(index.shape, source.elt)], [loops],
                            ["parallel"] * r, body)

    def keep_groups(self, hint, scores, groups, group_size, fill):
        """Group-limited routing's mask: scores [T, E] where expert e's
        group (e / group_size) is one of the row's `groups` ([T, g], each
        group once: a dc.topk's indices), else `fill` (a scalar SSA value of
        the scores' type). A generic over (t, e, j), j a reduction over the
        chosen groups."""
        elt = groups.elt
        size = self.hoist(("group_size", elt, group_size), "group_size",
                          f"arith.constant {group_size} : {elt}")

        def body(b):
            expert = b(f"arith.index_cast {b.index(1)} : index to {elt}")
            group = b(f"arith.divui {expert}, {size} : {elt}")
            hit = b(f"arith.cmpi eq, {b.ins[1]}, {group} : {elt}")
            return [b(f"arith.select {hit}, {b.ins[0]}, {b.outs[0]} : "
                      f"{scores.elt}")]
        init = self.empty(scores.shape, scores.elt)
        filled = Value(self.fresh(self.FILL), scores.shape, scores.elt)
        self.emit(f"{filled.name} = linalg.fill ins({fill} : {scores.elt}) "
                  f"outs({init.name} : {filled.type}) -> {filled.type}")
        return self.generic(hint, [scores, groups], [[0, 1], [0, 2]],
                            [filled], [[0, 1]],
                            ["parallel", "parallel", "reduction"], body)

    def group_by_expert(self, hint, ids, experts, capacity=0):
        """dc.group_by_expert; returns (order, ends). capacity > 0: each
        expert keeps at most that many assignments."""
        order = Value(self.fresh(f"{hint}_order"), [math.prod(ids.shape)],
                      ids.elt)
        ends = Value(self.fresh(f"{hint}_ends"), [experts], ids.elt)
        bound = f" capacity = {capacity}" if capacity else ""
        self.emit(f"{order.name}, {ends.name} = dc.group_by_expert "
                  f"{ids.name} experts = {experts}{bound} : {ids.type} -> "
                  f"{order.type}, {ends.type}")
        return order, ends

    def _rows_op(self, op, hint, source, index, rows):
        v = Value(self.fresh(hint), [rows] + list(source.shape[1:]),
                  source.elt)
        self.emit(f"{v.name} = dc.{op} {source.name}[{index.name}] : "
                  f"{source.type}, {index.type} -> {v.type}")
        return v

    def gather_rows(self, hint, source, index):
        """result[i] = source[index[i]]."""
        return self._rows_op("gather_rows", hint, source, index,
                             index.shape[0])

    def scatter_add_rows(self, hint, source, index, rows):
        """result[m] = sum of source[i] with index[i] == m, `rows` rows."""
        return self._rows_op("scatter_add_rows", hint, source, index, rows)

    def grouped_matmul(self, hint, lhs, rhs, ends, transpose_rhs=False):
        """Each expert's rows of lhs [N, K] times its matrix of the stacked
        rhs ([E, K, P], or [E, P, K] used transposed)."""
        cols = rhs.shape[1] if transpose_rhs else rhs.shape[2]
        v = Value(self.fresh(hint), [lhs.shape[0], cols], lhs.elt)
        flag = " transpose_rhs" if transpose_rhs else ""
        self.emit(f"{v.name} = dc.grouped_matmul {lhs.name}, {rhs.name}, "
                  f"{ends.name}{flag} : {lhs.type}, {rhs.type}, {ends.type} "
                  f"-> {v.type}")
        return v

    def grouped_weight_grad(self, hint, lhs, rhs, ends):
        """Per expert e: lhs[rows of e]^T rhs[rows of e], [E, K, P]."""
        v = Value(self.fresh(hint),
                  [ends.shape[0], lhs.shape[1], rhs.shape[1]], lhs.elt)
        self.emit(f"{v.name} = dc.grouped_weight_grad {lhs.name}, "
                  f"{rhs.name}, {ends.name} : {lhs.type}, {rhs.type}, "
                  f"{ends.type} -> {v.type}")
        return v
