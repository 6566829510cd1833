#!/usr/bin/env python3
"""dc's cost model beside a measured step, by kind of op.

Reads the IR dc-compile printed before dc-profile-ops (the ops the profile
keys count), the measured per-op profile of that step (`dc-run
--profile-out`) and dc-report's predicted trace of the same step
(`--dc-report="trace=..."`: one compute event per op the cost model counts,
in the same order), and prints per kind of op the predicted and measured
milliseconds, with what the measurement implies for the target preset's
fields: matrix products' TFLOP/s, the bandwidth of memory-bound kernels
(bytes as the cost model counts them, over measured time).

  python3 bench/calibrate.py IR.mlir profile.json predicted.json
"""
import argparse
import collections
import json
import re

import profile_by_kind

MATMUL_SHAPES = re.compile(r"tensor<(\d+)x(\d+)x\w+>")


def _read(path):
    """The text of `path` (closed after reading)."""
    with open(path) as f:
        return f.read()


def matmul_flops(text):
    """2 m n k of a linalg.matmul (k: the dim of A not in C)."""
    shapes = [tuple(int(d) for d in s)
              for s in MATMUL_SHAPES.findall(text)[:3]]
    if len(shapes) < 3:
        return 0
    (a0, a1), _, (m, n) = shapes
    k = a1 if a0 == m else a0
    return 2 * m * n * k


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("ir")
    parser.add_argument("profile")
    parser.add_argument("predicted")
    args = parser.parse_args()
    ops = [op for op in profile_by_kind.step_ops(args.ir)["train_step"]
           if profile_by_kind.is_counted(op[0])]
    measured = json.loads(_read(args.profile))["ops"]
    events = sorted((e for e in json.loads(_read(args.predicted))["traceEvents"]
                     if e.get("ph") == "X" and e.get("cat") == "compute"),
                    key=lambda e: e["args"]["index"])
    if len(events) != len(ops) or any(
            e["args"]["op"] != name for e, (name, _) in zip(events, ops)):
        raise SystemExit("calibrate.py: the predicted trace's compute ops are "
                         "not the profiled IR's (same step, same pipeline?)")
    kinds = collections.defaultdict(lambda: [0.0, 0.0, 0, 0, 0])
    for i, ((name, text), event) in enumerate(zip(ops, events)):
        kind = profile_by_kind.classify(name, text)
        row = kinds[kind]
        row[0] += event["dur"] * 1e-6
        row[1] += measured.get(f"train_step:{i}", 0.0)
        row[2] += 1
        row[3] += event["args"].get("bytes", 0)
        if kind == "matrix products":
            row[4] += matmul_flops(text)
    total_predicted = sum(r[0] for r in kinds.values())
    total_measured = sum(r[1] for r in kinds.values())
    print("| kind | ops | predicted ms | measured ms | measured / predicted "
          "| implied rate |")
    print("|---|---|---|---|---|---|")
    for kind, (pred, meas, count, nbytes, flops) in sorted(
            kinds.items(), key=lambda kv: -kv[1][1]):
        if flops and meas:
            rate = f"{flops / meas / 1e12:.0f} TFLOP/s"
        elif nbytes and meas:
            rate = f"{nbytes / meas / 1e12:.2f} TB/s"
        else:
            rate = ""
        ratio = f"{meas / pred:.2f}" if pred else ""
        print(f"| {kind} | {count} | {pred * 1e3:.2f} | {meas * 1e3:.2f} | "
              f"{ratio} | {rate} |")
    print(f"| all | {len(ops)} | {total_predicted * 1e3:.2f} | "
          f"{total_measured * 1e3:.2f} | "
          f"{total_measured / total_predicted:.2f} | |")


if __name__ == "__main__":
    main()
