#!/usr/bin/env python3
"""Compares collective-check outputs of two backends, rank by rank.

usage: compare-collectives.py REFERENCE_PREFIX CANDIDATE_PREFIX RANKS

Gathers, all-to-all, copies and integer sums must be bit-identical; float
reductions may differ by the order NCCL and MPI add in: within 1e-6 relative
(of the largest magnitude) in fp32, one bf16 rounding step in bf16.
"""
import struct
import sys

import numpy as np


def records(path):
    data = open(path, "rb").read()
    out, at = {}, 0
    while at < len(data):
        end = data.index(b"\0", at)
        name = data[at:end].decode()
        (size,) = struct.unpack_from("<q", data, end + 1)
        start = end + 9
        out[name] = data[start : start + size]
        at = start + size
    return out


def as_floats(name, raw):
    if name.endswith("bf16") or name in ("sum-scatter2", "avg-scatter2"):
        bits = np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16
        return bits.view(np.float32), 2.0**-7
    return np.frombuffer(raw, dtype=np.float32), 1e-6


def main():
    reference, candidate, ranks = sys.argv[1], sys.argv[2], int(sys.argv[3])
    failures = 0
    for rank in range(ranks):
        ref = records(f"{reference}.rank{rank}.bin")
        got = records(f"{candidate}.rank{rank}.bin")
        if ref.keys() != got.keys():
            print(f"rank {rank}: records differ: {sorted(ref)} vs {sorted(got)}")
            failures += 1
            continue
        for name in ref:
            exact = not ("scatter" in name or name.startswith("all-reduce-f") or name == "all-reduce-bf16")
            if exact:
                ok = ref[name] == got[name]
                detail = "bit-exact"
            else:
                a, tolerance = as_floats(name, ref[name])
                b, _ = as_floats(name, got[name])
                scale = max(float(np.max(np.abs(a))), 1e-30)
                error = float(np.max(np.abs(a - b))) / scale if a.size else 0.0
                ok = a.shape == b.shape and error <= tolerance
                detail = f"max error {error:.2e} of max |x| (tolerance {tolerance:.0e})"
            print(f"rank {rank} {name:20s} {len(ref[name]):9d} B  {'ok' if ok else 'MISMATCH'}  {detail}")
            failures += not ok
    print("collectives: cuda matches host" if failures == 0 else f"collectives: {failures} mismatches")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
