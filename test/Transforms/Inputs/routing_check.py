#!/usr/bin/env python3
"""The mixture-of-experts ops, expanded by dc-expand-experts and run with
upstream mlir-opt and mlir-runner, against a reference written here in
plain Python on the same inputs: top-k with ties and with k = E, the
grouping with skewed routing (every assignment to one expert), an expert
without assignments, dropped (out-of-range) ids and a capacity, gathers and
scatter-adds with out-of-range indices and repeated rows, the grouped
products with an empty group and rows past the last end, in both rhs
layouts. Each case prints `<name>: ok` or what differs; exits 1 on any
difference.

  routing_check.py --dc-opt PATH   (mlir-opt, mlir-runner on PATH)"""

import argparse
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

FLOAT_RE = re.compile(r"[-+]?(?:nan|inf|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)")


def flat(x):
    return [v for row in x for v in flat(row)] if isinstance(x, list) else [x]


def shape_of(x):
    return [len(x)] + shape_of(x[0]) if isinstance(x, list) else []


def literal(x, elt):
    if isinstance(x, list):
        return "[" + ", ".join(literal(v, elt) for v in x) + "]"
    return "%.9e" % x if elt.startswith("f") else str(int(x))


def tensor_type(x, elt):
    return "tensor<" + "x".join(map(str, shape_of(x))) + f"x{elt}>"


class Case:
    """One op on constant operands; `results` are (reference, elt)."""

    def __init__(self, name, op, operands, results):
        self.name, self.op, self.operands, self.results = name, op, operands, results

    def mlir(self, k):
        lines, names = [], []
        for i, (value, elt) in enumerate(self.operands):
            t = tensor_type(value, elt)
            lines.append(f"  %c{k}_{i} = arith.constant dense<{literal(value, elt)}> : {t}")
            names.append((f"%c{k}_{i}", t))
        outs = [f"%r{k}_{i}" for i in range(len(self.results))]
        types = [tensor_type(v, e) for v, e in self.results]
        lines.append("  " + ", ".join(outs) + " = " + self.op(
            [n for n, _ in names], [t for _, t in names], types))
        for i, ((value, elt), t) in enumerate(zip(self.results, types)):
            mem = "memref" + t[len("tensor"):]
            printer = {"f32": "F32", "i64": "I64", "i32": "I32"}[elt]
            lines += [f"  %b{k}_{i} = bufferization.to_buffer {outs[i]} : {t} to {mem}",
                      f"  %u{k}_{i} = memref.cast %b{k}_{i} : {mem} to memref<*x{elt}>",
                      f"  call @printMemref{printer}(%u{k}_{i}) : (memref<*x{elt}>) -> ()"]
        return lines


# -- the reference -------------------------------------------------------------

def topk(scores, k):
    values, indices = [], []
    for row in scores:
        order = sorted(range(len(row)), key=lambda e: (-row[e], e))[:k]
        values.append([row[e] for e in order])
        indices.append(order)
    return values, indices


def group_by_expert(ids, experts):
    ids = flat(ids)
    valid = lambda e: 0 <= e < experts
    order = sorted(range(len(ids)), key=lambda a: (ids[a] if valid(ids[a]) else experts, a))
    ends, total = [], 0
    for e in range(experts):
        total += sum(1 for i in ids if i == e)
        ends.append(total)
    return order, ends


def group_by_expert_capacity(ids, experts, capacity):
    """dc.group_by_expert's capacity rule as its description states it:
    each expert keeps its first `capacity` assignments in flat order; then
    the dropped ones by expert, in flat order; then the invalid ids."""
    kept = [[] for _ in range(experts)]
    dropped = [[] for _ in range(experts)]
    invalid = []
    for a, e in enumerate(flat(ids)):
        if not 0 <= e < experts:
            invalid.append(a)
        elif len(kept[e]) < capacity:
            kept[e].append(a)
        else:
            dropped[e].append(a)
    order = [a for rows in kept + dropped for a in rows] + invalid
    ends, total = [], 0
    for rows in kept:
        total += len(rows)
        ends.append(total)
    return order, ends


def gather_rows(source, index):
    zero = [0.0] * len(source[0])
    return [list(source[i]) if 0 <= i < len(source) else zero for i in index]


def scatter_add_rows(source, index, rows):
    out = [[0.0] * len(source[0]) for _ in range(rows)]
    for r, i in zip(source, index):
        if 0 <= i < rows:
            out[i] = [a + b for a, b in zip(out[i], r)]
    return out


def group_of(row, ends):
    return sum(1 for end in ends if end <= row)


def matmul(a, b):
    return [[sum(a[i][k] * b[k][j] for k in range(len(b)))
             for j in range(len(b[0]))] for i in range(len(a))]


def transpose(m):
    return [list(r) for r in zip(*m)]


def grouped_matmul(lhs, rhs, ends, transposed):
    columns = len(rhs[0]) if transposed else len(rhs[0][0])
    out = []
    for i, row in enumerate(lhs):
        e = group_of(i, ends)
        if e >= len(ends):
            out.append([0.0] * columns)
            continue
        w = transpose(rhs[e]) if transposed else rhs[e]
        out.append(matmul([row], w)[0])
    return out


def grouped_weight_grad(lhs, rhs, ends):
    out = []
    for e in range(len(ends)):
        rows = [i for i in range(len(lhs)) if group_of(i, ends) == e]
        a = [lhs[i] for i in rows] or [[0.0] * len(lhs[0])]
        b = [rhs[i] for i in rows] or [[0.0] * len(rhs[0])]
        out.append(matmul(transpose(a), b))
    return out


# -- the cases -----------------------------------------------------------------

def rand_matrix(rng, rows, cols):
    return [[rng.randint(-8, 8) / 4 for _ in range(cols)] for _ in range(rows)]


def cases():
    rng = random.Random(7)
    out = []
    # Ties (the lower position first) and k = E.
    scores = [[0.5, 0.25, 0.5, -1.0, 0.75], [0.0, 0.0, 0.0, 0.0, 0.0],
              [-2.0, 1.0, 3.0, 3.0, 0.5], [1.0, 2.0, 3.0, 4.0, 5.0]]
    for k, index_elt in ((2, "i64"), (5, "i32")):
        v, i = topk(scores, k)
        out.append(Case(
            f"topk k={k} {index_elt}",
            lambda n, t, r, k=k: f"dc.topk {n[0]} k = {k} : {t[0]} -> {r[0]}, {r[1]}",
            [(scores, "f32")], [(v, "f32"), (i, index_elt)]))
    # Grouping: balanced-ish, skewed to one expert, an empty expert, dropped ids.
    for name, ids, elt in (
            ("group mixed", [[2, 0], [1, 2], [0, 2], [2, 1]], "i64"),
            ("group skewed", [[3, 3], [3, 3], [3, 3]], "i64"),
            ("group dropped", [[0, -1], [4, 1], [1, 0]], "i32")):
        order, ends = group_by_expert(ids, 4)
        out.append(Case(
            name,
            lambda n, t, r: f"dc.group_by_expert {n[0]} experts = 4 : {t[0]} -> {r[0]}, {r[1]}",
            [(ids, elt)], [(order, elt), (ends, elt)]))
    # With a capacity: drops from several experts, an invalid id among
    # them, and a capacity no expert reaches.
    for name, ids, elt, capacity in (
            ("group capacity 2", [[2, 0], [1, 2], [0, 2], [2, 1], [-1, 2]], "i64", 2),
            ("group capacity 1", [[3, 3], [3, 1], [1, 3], [5, 0]], "i32", 1),
            ("group capacity 8", [[2, 0], [1, 2], [0, 2]], "i64", 8)):
        order, ends = group_by_expert_capacity(ids, 4, capacity)
        out.append(Case(
            name,
            lambda n, t, r, c=capacity: f"dc.group_by_expert {n[0]} experts = 4 capacity = {c} : {t[0]} -> {r[0]}, {r[1]}",
            [(ids, elt)], [(order, elt), (ends, elt)]))
    source = rand_matrix(rng, 4, 3)
    index = [2, 0, -1, 3, 2, 4]
    out.append(Case(
        "gather_rows", lambda n, t, r: f"dc.gather_rows {n[0]}[{n[1]}] : {t[0]}, {t[1]} -> {r[0]}",
        [(source, "f32"), (index, "i64")], [(gather_rows(source, index), "f32")]))
    rows = rand_matrix(rng, 6, 3)
    out.append(Case(
        "scatter_add_rows",
        lambda n, t, r: f"dc.scatter_add_rows {n[0]}[{n[1]}] : {t[0]}, {t[1]} -> {r[0]}",
        [(rows, "f32"), (index, "i32")], [(scatter_add_rows(rows, index, 4), "f32")]))
    # Expert 1 has no rows; row 5 is past the last end.
    ends = [1, 1, 4, 5]
    lhs = rand_matrix(rng, 6, 3)
    w = [rand_matrix(rng, 3, 2) for _ in range(4)]
    wt = [transpose(m) for m in w]
    out.append(Case(
        "grouped_matmul",
        lambda n, t, r: f"dc.grouped_matmul {n[0]}, {n[1]}, {n[2]} : {t[0]}, {t[1]}, {t[2]} -> {r[0]}",
        [(lhs, "f32"), (w, "f32"), (ends, "i64")],
        [(grouped_matmul(lhs, w, ends, False), "f32")]))
    out.append(Case(
        "grouped_matmul transpose_rhs",
        lambda n, t, r: f"dc.grouped_matmul {n[0]}, {n[1]}, {n[2]} transpose_rhs : {t[0]}, {t[1]}, {t[2]} -> {r[0]}",
        [(lhs, "f32"), (wt, "f32"), (ends, "i32")],
        [(grouped_matmul(lhs, wt, ends, True), "f32")]))
    grad = rand_matrix(rng, 6, 2)
    out.append(Case(
        "grouped_weight_grad",
        lambda n, t, r: f"dc.grouped_weight_grad {n[0]}, {n[1]}, {n[2]} : {t[0]}, {t[1]}, {t[2]} -> {r[0]}",
        [(lhs, "f32"), (grad, "f32"), (ends, "i64")],
        [(grouped_weight_grad(lhs, grad, ends), "f32")]))
    return out


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"{cmd[0]} failed:\n{p.stderr}")
    return p.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dc-opt", required=True)
    ap.add_argument("--keep")
    args = ap.parse_args()
    all_cases = cases()
    body = ["func.func private @printMemrefF32(memref<*xf32>)",
            "func.func private @printMemrefI64(memref<*xi64>)",
            "func.func private @printMemrefI32(memref<*xi32>)",
            "func.func @main() {"]
    for k, case in enumerate(all_cases):
        body += case.mlir(k)
    body += ["  return", "}"]
    work = args.keep or tempfile.mkdtemp()
    os.makedirs(work, exist_ok=True)
    src = os.path.join(work, "routing.mlir")
    with open(src, "w") as f:
        f.write("\n".join(body) + "\n")
    expanded = os.path.join(work, "expanded.mlir")
    run([args.dc_opt, src, "--dc-expand-experts", "-o", expanded])
    lowered = os.path.join(work, "lowered.mlir")
    run([shutil.which("mlir-opt"), expanded,
         "--one-shot-bufferize=bufferize-function-boundaries",
         "--convert-linalg-to-loops", "--convert-scf-to-cf",
         "--expand-strided-metadata", "--lower-affine",
         "--finalize-memref-to-llvm", "--convert-to-llvm",
         "--reconcile-unrealized-casts", "-o", lowered])
    runner = shutil.which("mlir-runner")
    libdir = os.path.join(os.path.dirname(os.path.realpath(runner)), "..", "lib")
    libs = ",".join(os.path.join(libdir, lib) for lib in
                    ("libmlir_runner_utils.so", "libmlir_c_runner_utils.so"))
    printed = run([runner, lowered, "-e", "main", "-entry-point-result=void",
                   f"-shared-libs={libs}"])
    chunks = [[float(x) for x in FLOAT_RE.findall(c.split("data =", 1)[1])]
              for c in printed.split("Unranked Memref")[1:]]
    failed = 0
    for case in all_cases:
        problems = []
        for reference, _ in case.results:
            got, want = chunks.pop(0), [float(v) for v in flat(reference)]
            if len(got) != len(want) or any(abs(a - b) > 1e-5 * (1 + abs(b))
                                            for a, b in zip(got, want)):
                problems.append(f"got {got}, want {want}")
        print(f"{case.name}: " + ("ok" if not problems else "; ".join(problems)))
        failed += bool(problems)
    print(f"{len(all_cases)} cases, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
