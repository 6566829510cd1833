#!/usr/bin/env python3
"""Loads dc artifacts (shared libraries) in this process and inspects or runs
them, with a test runtime that provides the dcrt_* symbols.

  artifact.py manifest STUB ARTIFACT
      prints dc_artifact_abi_version() and dc_artifact_manifest(), one
      argument or result per line
  artifact.py train STUB ARTIFACT... [--steps N] [--lr X] [--rtol R]
      runs N SGD steps of each artifact's first step function on the same
      seeded parameters and data, prints the first artifact's losses and
      exits 1 when another artifact's loss differs by more than R relative.

STUB is a one-rank dcrt (Inputs/dcrt_stub.c), loaded first with
RTLD_GLOBAL so the artifacts' undefined dcrt_* symbols resolve to it.
"""

import argparse
import ctypes
import json
import math
import os
import random
import struct
import sys

CTYPES = {"f32": ctypes.c_float, "bf16": ctypes.c_uint16,
          "f16": ctypes.c_uint16, "i32": ctypes.c_int32,
          "i64": ctypes.c_int64}


def to_bf16(x):
    bits = struct.unpack("<I", struct.pack("<f", x))[0]
    return (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16


def from_bf16(b):
    return struct.unpack("<f", struct.pack("<I", b << 16))[0]


def load(stub, path):
    runtime = ctypes.CDLL(os.path.abspath(stub), mode=ctypes.RTLD_GLOBAL)
    lib = ctypes.CDLL(os.path.abspath(path))
    lib.dc_artifact_manifest.restype = ctypes.c_char_p
    # The step arena the plan asks for, as dcrt_init would allocate it.
    plan = json.loads(lib.dc_artifact_manifest()).get("plan", {})
    runtime.dcrt_stub_reserve_arena(
        ctypes.c_int64(plan.get("step_arena_bytes", 0)))
    return lib


class Tensor:
    """A buffer for a manifest entry: `local` elements when sharded (one
    rank holds them all), else the whole shape."""

    def __init__(self, desc):
        self.dtype = desc["dtype"]
        self.numel = desc.get("local", math.prod(desc["shape"]))
        self.buf = (CTYPES[self.dtype] * self.numel)()

    def get(self):
        if self.dtype == "bf16":
            return [from_bf16(v) for v in self.buf]
        return list(self.buf)

    def set(self, values):
        for i, v in enumerate(values):
            self.buf[i] = to_bf16(v) if self.dtype == "bf16" else v


def initial_values(desc, rng, int_max):
    n = desc.get("local", math.prod(desc["shape"]))
    if desc["dtype"] in ("i32", "i64"):
        return [rng.randrange(int_max) for _ in range(n)]
    shape = desc["shape"]
    scale = math.sqrt(3.0 / shape[0]) if desc["kind"] == "param" and \
        len(shape) > 1 else 0.2 if desc["kind"] == "param" else 1.0
    return [scale * rng.uniform(-1, 1) for _ in range(n)]


def train(lib, opts):
    step = json.loads(lib.dc_artifact_manifest())["steps"][0]
    rng = random.Random(opts.seed)
    args = [Tensor(a) for a in step["args"]]
    for tensor, desc in zip(args, step["args"]):
        tensor.set(initial_values(desc, rng, opts.int_max))
    results = [Tensor(r) for r in step["results"]]
    pointers = (ctypes.c_void_p * (len(args) + len(results)))(
        *[ctypes.addressof(t.buf) for t in args + results])
    entry = getattr(lib, step["entry"])
    param_of = {a["id"]: t for a, t in zip(step["args"], args)
                if a["kind"] == "param"}
    losses = []
    for _ in range(opts.steps):
        entry(pointers)
        for desc, tensor in zip(step["results"], results):
            if desc["kind"] == "loss":
                losses.append(tensor.get()[0])
            else:
                param = param_of[desc["param"]]
                param.set([p - opts.lr * g for p, g in
                           zip(param.get(), tensor.get())])
    return losses


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=["manifest", "train"])
    ap.add_argument("stub")
    ap.add_argument("artifacts", nargs="+")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--rtol", type=float, default=1e-5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--int-max", type=int, default=1)
    opts = ap.parse_args(argv)
    libs = [load(opts.stub, path) for path in opts.artifacts]
    if opts.mode == "manifest":
        print("abi", libs[0].dc_artifact_abi_version())
        manifest = json.loads(libs[0].dc_artifact_manifest())
        steps = manifest.pop("steps")
        print(json.dumps(manifest))
        for step in steps:
            print("step", step["name"], "entry", step["entry"])
            for kind in ("args", "results"):
                for entry in step[kind]:
                    print(kind[:-1], json.dumps(entry))
        return 0
    runs = [train(lib, opts) for lib in libs]
    for i, loss in enumerate(runs[0]):
        print(f"step {i} loss {loss:.8g}")
    failed = 0
    for run in runs[1:]:
        for i, (want, got) in enumerate(zip(runs[0], run)):
            if abs(got - want) > opts.rtol * abs(want):
                print(f"step {i}: loss {got:.8g}, expected {want:.8g}")
                failed = 1
    sys.stdout.flush()
    ctypes.CDLL(os.path.abspath(opts.stub)).dcrt_stub_stats()
    return failed


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
