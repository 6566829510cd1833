#!/usr/bin/env python3
"""Finite-difference check of a dc training step's hand-written gradients.

Takes a module whose `@train_step` follows dc's input contract (parameters
marked #dc.param, then data; results: loss, then one gradient per
parameter; a parameter without a #dc.grad result, frozen, is an input that
is not perturbed), lowers it with upstream mlir-opt, and runs it with mlir-runner
from a generated `@main` that evaluates, for every parameter, the loss at
p + delta and p - delta for a few perturbations delta (random directions over
the whole tensor and single entries). Central differences
L(p + delta) - L(p - delta) are compared with g . (2 delta) from the analytic
gradient g at p. Everything runs in f32; the inputs are seeded and
deterministic.

Prints one line per check and the max relative error; exits 1 when any check
is outside `atol + rtol * |expected|`.
"""

import argparse
import math
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile

ARG_RE = re.compile(r"%([\w.$-]+)\s*:\s*(tensor<[^>]*>)\s*(\{dc\.param = [^}]*\})?")
PARAM_NAME_RE = re.compile(r'name = "([^"]*)"')
PARAM_ID_RE = re.compile(r"id = (\d+)")
GRAD_ID_RE = re.compile(r"#dc\.grad<param = (\d+)>")
ATTR_RE = re.compile(r"\s*\{dc\.(?:param|grad) = #dc\.\w+<[^>]*>\}|\s*\{dc\.loss\}")
MODULE_RE = re.compile(r"^module \{\n(.*)^\}\s*\Z", re.S | re.M)
FLOAT_RE = re.compile(r"[-+]?(?:nan|inf|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)")


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def parse_tensor_type(t):
    dims = t[len("tensor<"):-1].split("x")
    return [int(d) for d in dims[:-1]], dims[-1]


def dense(values, shape, elt):
    """A dense<...> literal; %.9g round-trips every f32 exactly."""
    fmt = (lambda v: "%.9g" % v) if elt == "f32" else (lambda v: str(v))

    def nest(flat, dims):
        if not dims:
            return fmt(flat[0])
        step = len(flat) // dims[0]
        return "[" + ", ".join(nest(flat[i * step:(i + 1) * step], dims[1:])
                               for i in range(dims[0])) + "]"

    return f"dense<{nest(values, shape)}> : {tensor_type(shape, elt)}"


def tensor_type(shape, elt):
    return "tensor<" + "".join(f"{d}x" for d in shape) + elt + ">"


def step_source(text):
    """The step without dc's attributes and without the `module { }` that
    mlir-opt and dc-opt print around it, so that @main can follow it."""
    wrapped = MODULE_RE.search(text)
    if wrapped:
        text = text[:wrapped.start()] + wrapped.group(1)
    return ATTR_RE.sub("", text)


def param_name(match):
    named = PARAM_NAME_RE.search(match.group(3) or "")
    return named.group(1) if named else match.group(1)


def signature(text):
    start = text.index("func.func @train_step(")
    body = text.index("{\n", text.index("->", start))
    sig = text[start:body]
    head, results = sig.split("->", 1)
    # A parameter's name is its #dc.param name if any: dc-opt's output
    # names every argument %argN.
    args = [(param_name(m), *parse_tensor_type(m.group(2)),
             m.group(3) is not None) for m in ARG_RE.finditer(head)]
    result_types = re.findall(r"tensor<[^>]*>", results)
    return args, result_types


def gradient_results(text, args):
    """{arg index: the index among the gradient results of its gradient}:
    by #dc.grad where the results are marked (a parameter without one, a
    frozen buffer, is an input and is not checked), else every parameter's
    in order."""
    start = text.index("func.func @train_step(")
    body = text.index("{\n", text.index("->", start))
    head, results = text[start:body].split("->", 1)
    ids = [int(PARAM_ID_RE.search(m.group(3)).group(1)) if m.group(3)
           else None for m in ARG_RE.finditer(head)]
    grad_ids = [int(g) for g in GRAD_ID_RE.findall(results)]
    if grad_ids:
        return {a: grad_ids.index(ids[a]) for a in range(len(args))
                if ids[a] in grad_ids}
    return {a: n for n, a in enumerate(
        a for a in range(len(args)) if args[a][3])}


def initial_values(args, rng, int_max):
    values = []
    for name, shape, elt, is_param in args:
        n = math.prod(shape)
        if elt == "i32":
            values.append([rng.randrange(int_max) for _ in range(n)])
        elif is_param and len(shape) == 1 and "norm" in name:
            values.append([f32(1.0 + 0.2 * rng.uniform(-1, 1)) for _ in range(n)])
        elif is_param and len(shape) == 1:
            values.append([f32(0.2 * rng.uniform(-1, 1)) for _ in range(n)])
        else:
            # Unit variance over the fan-in keeps activations O(1).
            scale = math.sqrt(3.0 / shape[0]) if is_param else 1.0
            values.append([f32(scale * rng.uniform(-1, 1)) for _ in range(n)])
    return values


def make_checks(args, values, rng, step, directions, entries, trainable):
    """Per parameter with a gradient (the arg indices `trainable`):
    `directions` random whole-tensor perturbations and `entries`
    single-entry ones. Each check is (arg index, plus, minus)."""
    checks = []
    for a, (name, shape, elt, is_param) in enumerate(args):
        if a not in trainable:
            continue
        base = values[a]
        for _ in range(directions):
            r = [rng.uniform(-1, 1) for _ in base]
            checks.append((a, [f32(p + step * x) for p, x in zip(base, r)],
                           [f32(p - step * x) for p, x in zip(base, r)]))
        for _ in range(entries):
            i = rng.randrange(len(base))
            plus, minus = list(base), list(base)
            plus[i], minus[i] = f32(base[i] + step), f32(base[i] - step)
            checks.append((a, plus, minus))
    return checks


def main_function(args, result_types, values, checks):
    lines = ["func.func private @printMemrefF32(memref<*xf32>)",
             "func.func @main() {"]
    arg_types = [tensor_type(s, e) for _, s, e, _ in args]
    for a, (name, shape, elt, _) in enumerate(args):
        lines.append(f"  %v{a} = arith.constant {dense(values[a], shape, elt)}")
    sig = f"({', '.join(arg_types)}) -> ({', '.join(result_types)})"
    nres = len(result_types)

    def call(res, operands):
        lines.append(f"  %{res}:{nres} = call @train_step({', '.join(operands)})"
                     f" : {sig}")

    call("base", [f"%v{a}" for a in range(len(args))])
    lines.append(f"  %diffs = arith.constant dense<0.0> : tensor<{len(checks)}xf32>")
    for c, (a, plus, minus) in enumerate(checks):
        shape, elt = args[a][1], args[a][2]
        losses = []
        for sign, vals in (("p", plus), ("m", minus)):
            lines.append(f"  %c{c}{sign} = arith.constant {dense(vals, shape, elt)}")
            operands = [f"%v{i}" for i in range(len(args))]
            operands[a] = f"%c{c}{sign}"
            call(f"r{c}{sign}", operands)
            lines.append(f"  %l{c}{sign} = tensor.extract %r{c}{sign}#0[] : "
                         "tensor<f32>")
            losses.append(f"%l{c}{sign}")
        lines.append(f"  %d{c} = arith.subf {losses[0]}, {losses[1]} : f32")
        lines.append(f"  %i{c} = arith.constant {c} : index")
        prev = "%diffs" if c == 0 else f"%diffs{c - 1}"
        lines.append(f"  %diffs{c} = tensor.insert %d{c} into {prev}[%i{c}] : "
                     f"tensor<{len(checks)}xf32>")
    # (With no checks, --directions 0 --entries 0: the loss and gradients
    # at p alone.)
    printed = [(f"%diffs{len(checks) - 1}" if checks else "%diffs",
                f"tensor<{len(checks)}xf32>")]
    printed += [(f"%base#{i}", t) for i, t in enumerate(result_types)]
    lines += print_tensors(printed)
    lines += ["  return", "}"]
    return "\n".join(lines) + "\n"


def print_tensors(values):
    """Lines of @main that print each (SSA value, tensor type), widening
    bf16 to f32 first, with printMemrefF32."""
    lines = []
    for k, (v, t) in enumerate(values):
        shape, elt = parse_tensor_type(t)
        if elt != "f32":
            wide = tensor_type(shape, "f32")
            lines.append(f"  %w{k} = arith.extf {v} : {t} to {wide}")
            v, t = f"%w{k}", wide
        mem = t.replace("tensor<", "memref<")
        lines.append(f"  %b{k} = bufferization.to_buffer {v} : {t} to {mem}")
        lines.append(f"  %u{k} = memref.cast %b{k} : {mem} to memref<*xf32>")
        lines.append(f"  call @printMemrefF32(%u{k}) : (memref<*xf32>) -> ()")
    return lines


def run(cmd, **kw):
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if proc.returncode:
        sys.exit(f"gradcheck: {' '.join(cmd[:2])} failed:\n{proc.stderr[-4000:]}")
    return proc.stdout


def execute(module, workdir):
    """Lowers `module` with mlir-opt, runs its @main with mlir-runner and
    returns the printed tensors as flat lists of floats."""
    mlir_opt = shutil.which("mlir-opt")
    runner = shutil.which("mlir-runner")
    if not mlir_opt or not runner:
        sys.exit("gradcheck: mlir-opt and mlir-runner must be on PATH")
    libdir = os.path.join(os.path.dirname(os.path.realpath(runner)), "..", "lib")
    src = os.path.join(workdir, "step.mlir")
    lowered = os.path.join(workdir, "step.llvm.mlir")
    with open(src, "w") as f:
        f.write(module)
    run([mlir_opt, src, "--convert-elementwise-to-linalg",
         "--one-shot-bufferize=bufferize-function-boundaries",
         "--convert-linalg-to-loops", "--convert-scf-to-cf",
         "--expand-strided-metadata", "--lower-affine",
         "--finalize-memref-to-llvm", "--convert-math-to-llvm",
         "--convert-to-llvm", "--reconcile-unrealized-casts", "-o", lowered])
    libs = ",".join(os.path.join(libdir, lib) for lib in
                    ("libmlir_runner_utils.so", "libmlir_c_runner_utils.so"))
    out = run([runner, lowered, "-e", "main", "-entry-point-result=void",
               f"-shared-libs={libs}"])
    chunks = out.split("Unranked Memref")[1:]
    return [[float(x) for x in FLOAT_RE.findall(c.split("data =", 1)[1])]
            for c in chunks]


def lower_and_run(module, keep=None):
    """execute() in `keep` when given, else in a temporary directory."""
    if keep:
        os.makedirs(keep, exist_ok=True)
        return execute(module, keep)
    with tempfile.TemporaryDirectory() as tmp:
        return execute(module, tmp)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("input", help="MLIR file with @train_step")
    ap.add_argument("--int-max", type=int, default=1,
                    help="integer data (token ids) are drawn from [0, N)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--step", type=float, default=3e-3,
                    help="perturbation size per entry")
    ap.add_argument("--directions", type=int, default=2)
    ap.add_argument("--entries", type=int, default=2)
    ap.add_argument("--rtol", type=float, default=1e-2)
    ap.add_argument("--atol", type=float, default=3e-6,
                    help="absolute tolerance on the loss difference")
    ap.add_argument("--keep", help="directory to keep the generated files in")
    opts = ap.parse_args(argv)

    with open(opts.input) as f:
        text = f.read()
    args, result_types = signature(text)
    grad_result = gradient_results(text, args)
    if len(result_types) != 1 + len(grad_result):
        sys.exit("gradcheck: expected the loss and one gradient per "
                 "parameter (per #dc.grad)")
    rng = random.Random(opts.seed)
    values = initial_values(args, rng, opts.int_max)
    checks = make_checks(args, values, rng, opts.step, opts.directions,
                         opts.entries, grad_result)
    module = step_source(text) + main_function(args, result_types, values,
                                                   checks)
    out = lower_and_run(module, opts.keep)
    diffs, loss, grads = out[0], out[1][0], out[2:]
    grad_of = {a: grads[r] for a, r in grad_result.items()}
    print(f"loss {loss:.6g}")
    failures, max_rel = 0, 0.0
    for c, (a, plus, minus) in enumerate(checks):
        expected = sum(g * (p - m) for g, p, m in
                       zip(grad_of[a], plus, minus))
        err = abs(diffs[c] - expected)
        ok = err <= opts.atol + opts.rtol * abs(expected)
        rel = err / abs(expected) if expected else (0.0 if not err else math.inf)
        if abs(expected) > opts.atol / opts.rtol:
            max_rel = max(max_rel, rel)
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {args[a][0]:28} analytic "
              f"{expected: .6e} finite-difference {diffs[c]: .6e} rel {rel:.2e}")
    print(f"checks {len(checks)} failed {failures} max-rel-error {max_rel:.3e}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
