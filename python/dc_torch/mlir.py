"""Writes MLIR text on statically shaped tensors: fresh SSA names, hoisted
scalar constants, and the handful of op forms the lowering needs (linalg
generics and named ops, tensor reshapes and slices). It knows nothing about
torch; lower.py decides what to emit."""

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


def location(name, frame=None, note=None):
    """An MLIR location for the ops of one FX node: its name (with `note`,
    e.g. the backward function that traced it) around the model's source
    line where one was recorded (`loc("mul_3"("model.py":41:0))`)."""
    quote = lambda t: '"' + t.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if note:
        name = f"{name} ({note})"
    if frame:
        file, line = frame[0], frame[1]
        return f"loc({quote(name)}({quote(file)}:{line}:0))"
    return f"loc({quote(name)})"


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
    """The scalar region of one linalg.generic. Floats are computed in f32:
    `load` widens bf16/f16 and the caller narrows the result once."""

    def __init__(self, module, in_elts, out_elts):
        self.m = module
        self.lines = []
        self.ins = [f"%in{i}" for i in range(len(in_elts))]
        self.outs = [f"%out{i}" for i in range(len(out_elts))]
        self.in_elts, self.out_elts = list(in_elts), list(out_elts)

    def __call__(self, rhs):
        name = f"%s{len(self.lines)}"
        self.lines.append(f"{name} = {rhs}")
        return name

    def const(self, value, elt="f32"):
        if elt in FLOAT_TYPES:
            return self(f"arith.constant {float_literal(value, elt)} : {elt}")
        if elt == "i1":
            return self(f"arith.constant {'true' if value else 'false'}")
        return self(f"arith.constant {int(value)} : {elt}")

    def convert(self, v, src, dst):
        """Scalar conversion between element types."""
        if src == dst:
            return v
        if src in FLOAT_TYPES and dst in FLOAT_TYPES:
            wide = {"f16": 16, "bf16": 16, "f32": 32}
            if src in ("bf16", "f16") and dst in ("bf16", "f16"):
                v = self(f"arith.extf {v} : {src} to f32")
                src = "f32"
            op = "arith.extf" if wide[dst] > wide[src] else "arith.truncf"
            return self(f"{op} {v} : {src} to {dst}")
        if src == "i1" and dst in FLOAT_TYPES:
            return self(f"arith.uitofp {v} : i1 to {dst}")
        if src in FLOAT_TYPES and dst == "i1":
            zero = self.const(0.0, src)
            return self(f"arith.cmpf une, {v}, {zero} : {src}")
        if dst in FLOAT_TYPES:
            return self(f"arith.sitofp {v} : {src} to {dst}")
        if src in FLOAT_TYPES:
            return self(f"arith.fptosi {v} : {src} to {dst}")
        if src == "i1":
            return self(f"arith.extui {v} : i1 to {dst}")
        if dst == "i1":
            zero = self.const(0, src)
            return self(f"arith.cmpi ne, {v}, {zero} : {src}")
        bits = lambda t: int(t[1:])
        op = "arith.extsi" if bits(dst) > bits(src) else "arith.trunci"
        return self(f"{op} {v} : {src} to {dst}")

    def index(self, dim):
        return self(f"linalg.index {dim} : index")


class Module:
    """The body of one function under construction."""

    def __init__(self):
        self.lines = []
        self.names = set()
        self.constants = {}
        self.depth = 0
        # The location the ops being emitted get (`loc(...)`, the FX node
        # and the model's source line they come from), and how many
        # regions the emitted text has open: an op ends on a line that
        # leaves open only the scf regions it is emitted in (`depth`).
        self.loc = None
        self._open = 0

    def fresh(self, hint):
        hint = "".join(c if c.isalnum() or c == "_" else "_" for c in hint)
        name, n = hint, 1
        while name in self.names:
            n += 1
            name = f"{hint}_{n}"
        self.names.add(name)
        return "%" + name

    def emit(self, line):
        text = line.rstrip()
        if text.startswith("}"):
            self._open -= 1
        if text.endswith("{"):
            self._open += 1
        elif self._open == self.depth and self.loc:
            line = f"{line} {self.loc}"
        self.lines.append("  " * (1 + self.depth) + line)

    def index_const(self, value):
        key = ("index", value)
        if key not in self.constants:
            self.constants[key] = (self.fresh(f"c{value}"),
                                   f"arith.constant {value} : index")
        return self.constants[key][0]

    def scalar_const(self, value, elt):
        key = (elt, repr(value))
        if key not in self.constants:
            text = float_literal(value, elt) if elt in FLOAT_TYPES else int(value)
            self.constants[key] = (self.fresh("cst"),
                                   f"arith.constant {text} : {elt}")
        return self.constants[key][0]

    # -- tensor ops ----------------------------------------------------------

    def empty(self, shape, elt):
        v = Value(self.fresh("empty"), shape, elt)
        self.emit(f"{v.name} = tensor.empty() : {v.type}")
        return v

    def filled(self, shape, elt, value, hint="fill"):
        init = self.empty(shape, elt)
        v = Value(self.fresh(hint), shape, elt)
        self.emit(f"{v.name} = linalg.fill ins({self.scalar_const(value, elt)}"
                  f" : {elt}) outs({init.name} : {v.type}) -> {v.type}")
        return v

    def generic(self, hint, ins, in_maps, inits, out_maps, iterators, body):
        """linalg.generic; maps are lists of affine result expressions
        (strings over d0..dn); `body(b)` returns the yielded scalars (of the
        inits' element types)."""
        n = len(iterators)
        dims = ", ".join(f"d{i}" for i in range(n))
        b = Body(self, [v.elt for v in ins], [v.elt for v in inits])
        yields = body(b)
        base = self.fresh(hint)
        if len(inits) == 1:
            lhs, names = base, [base]
        else:
            lhs = f"{base}:{len(inits)}"
            names = [f"{base}#{i}" for i in range(len(inits))]
        maps = ", ".join(f"affine_map<({dims}) -> ({', '.join(m)})>"
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

    def matmul(self, a, b, acc, transpose_a=False, transpose_b=False):
        """acc + a @ b; a transposed operand is read through its indexing
        map instead of being copied."""
        maps = ""
        if transpose_a or transpose_b:
            maps = ("indexing_maps = [affine_map<(d0, d1, d2) -> "
                    f"({'d2, d0' if transpose_a else 'd0, d2'})>, "
                    "affine_map<(d0, d1, d2) -> "
                    f"({'d1, d2' if transpose_b else 'd2, d1'})>, "
                    "affine_map<(d0, d1, d2) -> (d0, d1)>] ")
        v = Value(self.fresh("mm"), acc.shape, acc.elt)
        self.emit(f"{v.name} = linalg.matmul {maps}ins({a.name}, {b.name} : "
                  f"{a.type}, {b.type}) outs({acc.name} : {v.type}) -> "
                  f"{v.type}")
        return v

    def batch_matmul(self, a, b, acc, transpose_a=False, transpose_b=False):
        maps = ""
        if transpose_a or transpose_b:
            maps = ("indexing_maps = [affine_map<(d0, d1, d2, d3) -> "
                    f"({'d0, d3, d1' if transpose_a else 'd0, d1, d3'})>, "
                    "affine_map<(d0, d1, d2, d3) -> "
                    f"({'d0, d2, d3' if transpose_b else 'd0, d3, d2'})>, "
                    "affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>] ")
        v = Value(self.fresh("bmm"), acc.shape, acc.elt)
        self.emit(f"{v.name} = linalg.batch_matmul {maps}ins({a.name}, "
                  f"{b.name} : {a.type}, {b.type}) outs({acc.name} : "
                  f"{v.type}) -> {v.type}")
        return v

    def transpose(self, x, perm):
        init = self.empty([x.shape[p] for p in perm], x.elt)
        v = Value(self.fresh("transpose"), init.shape, x.elt)
        self.emit(f"{v.name} = linalg.transpose ins({x.name} : {x.type}) "
                  f"outs({init.name} : {v.type}) permutation = "
                  f"[{', '.join(map(str, perm))}]")
        return v

    @staticmethod
    def _groups(groups):
        return "[" + ", ".join(
            "[" + ", ".join(map(str, g)) + "]" for g in groups) + "]"

    def reshape(self, x, shape):
        """Row-major reshape: collapse to one dim, expand to `shape`."""
        shape = tuple(shape)
        if shape == x.shape:
            return x
        flat = x
        if x.rank != 1:
            flat = Value(self.fresh("flat"), [math.prod(x.shape)], x.elt)
            groups = [list(range(x.rank))] if x.rank else []
            op = "collapse_shape" if x.rank else "expand_shape"
            extra = " output_shape [1]" if not x.rank else ""
            self.emit(f"{flat.name} = tensor.{op} {x.name} "
                      f"{self._groups(groups)}{extra} : {x.type} into "
                      f"{flat.type}")
        if len(shape) == 1:
            return flat
        v = Value(self.fresh("view"), shape, x.elt)
        if not shape:
            self.emit(f"{v.name} = tensor.collapse_shape {flat.name} [] : "
                      f"{flat.type} into {v.type}")
        else:
            self.emit(f"{v.name} = tensor.expand_shape {flat.name} "
                      f"[{list(range(len(shape)))}] output_shape "
                      f"[{', '.join(map(str, shape))}] : {flat.type} into "
                      f"{v.type}")
        return v

    def extract_slice(self, x, offsets, sizes, strides):
        if 0 in sizes:  # no elements (a rotation's empty pass-through)
            return self.empty(sizes, x.elt)
        v = Value(self.fresh("slice"), sizes, x.elt)
        self.emit(f"{v.name} = tensor.extract_slice {x.name}"
                  f"[{', '.join(map(str, offsets))}] "
                  f"[{', '.join(map(str, sizes))}] "
                  f"[{', '.join(map(str, strides))}] : {x.type} to {v.type}")
        return v

    def insert_slice(self, src, dst, offsets, strides=None):
        if 0 in src.shape:
            return dst
        strides = strides or [1] * src.rank
        v = Value(self.fresh("inserted"), dst.shape, dst.elt)
        self.emit(f"{v.name} = tensor.insert_slice {src.name} into "
                  f"{dst.name}[{', '.join(map(str, offsets))}] "
                  f"[{', '.join(map(str, src.shape))}] "
                  f"[{', '.join(map(str, strides))}] : {src.type} into "
                  f"{dst.type}")
        return v
