"""dc_torch's MLIR writer: dc_mlir's, with the ops' locations (the FX
node and the model's source line), scalar conversions in generic bodies and
row-major reshapes. It knows nothing about torch; lower.py decides what to
emit."""


import dc_mlir
from dc_mlir import FLOAT_TYPES


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


class Body(dc_mlir.Body):
    """The scalar region of one linalg.generic, with constants and
    conversions between element types in it."""

    def const(self, value, elt="f32"):
        if elt in FLOAT_TYPES:
            return self(f"arith.constant "
                        f"{dc_mlir.float_literal(value, elt)} : {elt}")
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


class Module(dc_mlir.Module):
    """The body of one function under construction; its ops get the
    location `loc` (`loc(...)`, the FX node and the model's source line
    they come from) while it is set."""

    Body = Body

    def __init__(self):
        super().__init__()
        self.loc = None
        # How many regions the emitted text has open: an op ends on a line
        # that leaves open only the scf regions it is emitted in (`depth`).
        self._open = 0

    def emit(self, line):
        text = line.rstrip()
        if text.startswith("}"):
            self._open -= 1
        if text.endswith("{"):
            self._open += 1
        elif self._open == self.depth and self.loc:
            line = f"{line} {self.loc}"
        super().emit(line)

    def reshape(self, x, shape):
        """Row-major reshape: collapse to one dim, expand to `shape`."""
        shape = tuple(shape)
        if shape == x.shape:
            return x
        flat = x
        if x.rank == 0:
            flat = self.expand("flat", x, [], [1])
        elif x.rank != 1:
            flat = self.collapse("flat", x, [list(range(x.rank))])
        if len(shape) == 1:
            return flat
        if not shape:
            return self.collapse("view", flat, [])
        return self.expand("view", flat, [list(range(len(shape)))], shape)
