#!/usr/bin/env python3
"""Sums a dc-run --profile-out profile by kind of op.

The profile's keys are "<function>:<ordinal>", the ordinal counting the ops
of the step function the way dc's cost model does (dc schedule ops other
than the attention ops are not counted). This script reads the same
function from the IR dc-compile prints before dc-profile-ops
(`--mlir-print-ir-before=dc-profile-ops`), classifies each op roughly as
dc-map-to-gpu dispatches it, and prints milliseconds per kind.

  dc-compile STEP.mlir --target=h200 --profile-ops \
      --mlir-print-ir-before=dc-profile-ops 2> IR.mlir -o step.so
  dc-run step.so --profile-out profile.json ...
  python3 bench/profile_by_kind.py IR.mlir profile.json [--top N]
"""
import argparse
import json
import re
import sys

OP_START = re.compile(r'^    (?:%[^=]+= )?"?([a-z_]+\.[a-z_.]+)')


def step_ops(ir_path):
    """(function name, [(op name, text of the op)]) of each function body."""
    functions = {}
    name = None
    ops = []
    for line in open(ir_path):
        found = re.match(r"^  func\.func @([\w.$-]+)", line)
        if found:
            name = found.group(1)
            ops = functions.setdefault(name, [])
            continue
        if name is None:
            continue
        if line.startswith("  }"):
            name = None
            continue
        start = OP_START.match(line)
        if start:
            ops.append([start.group(1), line])
        elif ops:
            ops[-1][1] += line
    return functions


# The dc compute ops (ComputeOpInterface): the cost model counts them with
# the upstream ops; the other dc ops (transfers, waits) it does not.
DC_COMPUTE = ("dc.attention", "dc.attention_grad", "dc.topk",
              "dc.group_by_expert", "dc.gather_rows", "dc.scatter_add_rows",
              "dc.grouped_matmul", "dc.grouped_weight_grad")


def is_counted(op):
    return not op.startswith("dc.") or op in DC_COMPUTE


def classify(op, text):
    if op in ("linalg.matmul", "linalg.batch_matmul"):
        return "matrix products"
    if op == "dc.attention":
        return "attention forward"
    if op == "dc.attention_grad":
        return "attention backward"
    if op in ("dc.grouped_matmul", "dc.grouped_weight_grad"):
        return "grouped products (experts)"
    if op in ("dc.topk", "dc.group_by_expert", "dc.gather_rows",
              "dc.scatter_add_rows"):
        return "routing (top-k, grouping, gathers, scatter-adds)"
    if op == "linalg.fill":
        return "fills"
    if op == "linalg.transpose":
        return "transposes"
    if op in ("tensor.insert_slice", "tensor.extract_slice"):
        return "slices"
    if op == "scf.for":
        return "sequential loops (embedding gradient)"
    if op == "linalg.generic":
        iters = re.search(r"iterator_types = \[([^\]]*)\]", text)
        kinds = [k.strip().strip('"') for k in iters.group(1).split(",")] if iters else []
        if "reduction" not in kinds:
            return "elementwise"
        # Three or more loops with a product in the body: a contraction,
        # which dc-map-to-gpu hands to cuBLASLt.
        if len(kinds) >= 3 and "arith.mulf" in text:
            return "contractions"
        if kinds[-1] == "reduction":
            return "row reductions"
        return "column reductions"
    if op in ("tensor.empty", "tensor.collapse_shape", "tensor.expand_shape",
              "arith.constant"):
        return "views and constants (no kernel)"
    return op


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("ir")
    parser.add_argument("profile")
    parser.add_argument("--top", type=int, default=0,
                        help="also list the N slowest ops")
    args = parser.parse_args()
    times = json.load(open(args.profile))["ops"]
    kinds = {}
    slowest = []
    for fn, ops in step_ops(args.ir).items():
        ordinal = 0
        for op, text in ops:
            if not is_counted(op):
                continue
            key = "%s:%d" % (fn, ordinal)
            ordinal += 1
            if key not in times:
                continue
            kind = classify(op, text)
            total, count = kinds.get(kind, (0.0, 0))
            kinds[kind] = (total + times[key], count + 1)
            slowest.append((times[key], key, kind, text.split("\n")[0].strip()[:150]))
    unmatched = set(times) - {s[1] for s in slowest}
    total = sum(t for t, _ in kinds.values())
    print("%d ops, %.2f ms in all%s" % (
        sum(c for _, c in kinds.values()), total * 1e3,
        "; %d profile keys not in the IR" % len(unmatched) if unmatched else ""))
    print("| kind | ms | ops | ms per op |")
    print("|---|---|---|---|")
    for kind, (t, c) in sorted(kinds.items(), key=lambda kv: -kv[1][0]):
        print("| %s | %.2f | %d | %.4f |" % (kind, t * 1e3, c, t * 1e3 / c))
    for t, key, kind, line in sorted(slowest, reverse=True)[:args.top]:
        print("%8.3f ms  %-10s %-22s %s" % (t * 1e3, key, kind, line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
