#!/usr/bin/env python3
"""checkpoints_close.py [--rtol R] [--atol A] A B: exit 1 unless the f32
tensors of safetensors files A and B have the same names and shapes and agree
elementwise within |a - b| <= atol + rtol |b| (rtol 0, atol 0: bit-equal)."""
import argparse
import json
import struct
import sys


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    header.pop("__metadata__", None)
    body = data[8 + length:]
    tensors = {}
    for name, entry in header.items():
        if entry["dtype"] != "F32":
            sys.exit(f"{path}: tensor {name} is {entry['dtype']}, only F32 is compared")
        begin, end = entry["data_offsets"]
        raw = body[begin:end]
        tensors[name] = (entry["shape"], struct.unpack(f"<{len(raw) // 4}f", raw))
    return tensors


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rtol", type=float, default=0.0)
    parser.add_argument("--atol", type=float, default=0.0)
    parser.add_argument("a")
    parser.add_argument("b")
    args = parser.parse_args()
    a, b = read(args.a), read(args.b)
    if sorted(a) != sorted(b):
        sys.exit(f"different tensors: {sorted(set(a) ^ set(b))}")
    worst = 0.0
    for name in sorted(a):
        (shape_a, values_a), (shape_b, values_b) = a[name], b[name]
        if shape_a != shape_b:
            sys.exit(f"{name}: shape {shape_a} vs {shape_b}")
        for i, (x, y) in enumerate(zip(values_a, values_b)):
            if abs(x - y) > args.atol + args.rtol * abs(y):
                sys.exit(f"{name}[{i}]: {x!r} vs {y!r}")
            worst = max(worst, abs(x - y))
    print(f"checkpoints agree: {len(a)} tensors, max difference {worst:.3g}")


if __name__ == "__main__":
    main()
