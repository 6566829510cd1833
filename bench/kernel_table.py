#!/usr/bin/env python3
"""dc's generated kernels and matrix products beside PyTorch's, on one GPU.

dc's side is the measured per-op profile of a whole compiled step
(`dc-run --profile-out`, events around each op of the step as the cost
model counts them) read with the IR dc-compile printed before dc-profile-ops
(see bench/profile_by_kind.py); the peer's is bench/kernel_bench.py's JSON
(Inductor on the same ops at the same shapes, torch.matmul on the same
products, the device's copy bandwidth).

A named op (RMSNorm forward, ...) is several dc kernels: its dc time is the
sum, over the kernels that make it, of each kernel's mean time in the step.
Its effective bandwidth is the op's least traffic (each input read once,
each output written once, from the peer's JSON) over that time, as a share
of the copy bandwidth. A named op that A's step lacks (the rotary
embedding: the reference configs have none) is looked up in `--extra`, the
IR and profile of another step at A's shapes (dc-gen-llama --rotary).

  python3 bench/kernel_table.py --gemms IR.mlir > gemms.json
  python3 bench/kernel_table.py IR.mlir profile.json peer.json \
      [--extra IR2.mlir profile2.json]
  python3 bench/kernel_table.py --compare LABEL=IR.mlir,profile.json ...
"""
import argparse
import collections
import json
import re
import sys

import profile_by_kind

# The dc kernels of each named op at config A's shapes: (kind, regex over
# the body's arith/math ops, regex over the op's distinct tensor types[,
# regex over the op's text]).
D, F, T, V = "2048", "5632", "8192", "32000"
NAMED = {
    "rmsnorm forward": [
        ("row reductions", r"^extf extf mulf addf$", rf"^{T}x{D}xbf16 {T}xf32$"),
        ("elementwise", r"^mulf addf rsqrt$", rf"^{T}xf32$"),
        ("elementwise", r"^extf mulf extf mulf truncf$",
         rf"^{T}x{D}xbf16 {T}xf32 {D}xbf16$"),
        ("fills", r"", rf"^{T}xf32$"),
    ],
    "rmsnorm backward": [
        ("row reductions", r"^extf extf mulf extf mulf mulf addf$", ""),
        ("elementwise", r"subf mulf truncf$", rf"^{T}x{D}xbf16 {D}xbf16 {T}xf32$"),
        ("column reductions", r"^extf extf mulf mulf addf$", ""),
        ("elementwise", r"^truncf$", rf"^{D}xf32 {D}xbf16$"),
        ("fills", r"", rf"^{T}xf32$"),
        ("fills", r"", rf"^{D}xf32$"),
    ],
    "swiglu forward": [
        ("elementwise", r"^extf negf exp addf divf mulf extf mulf truncf$",
         rf"^{T}x{F}xbf16$"),
    ],
    "swiglu backward": [
        ("elementwise", r"^extf extf extf negf exp", rf"^{T}x{F}xbf16$"),
    ],
    "residual add": [
        ("elementwise", r"^extf extf addf truncf$", rf"^{T}x{D}xbf16$"),
    ],
    "cross-entropy forward": [
        ("row reductions", r"^extf maximumf$", rf"^{T}x{V}xbf16 {T}xf32$"),
        ("row reductions", r"^extf subf exp addf$", rf"^{T}x{V}xbf16"),
        ("elementwise", r"^log addf$", rf"^{T}xf32$"),
        ("row reductions", r"^index_cast", ""),
        ("fills", r"", rf"^{T}xf32$"),
        ("fills", r"", rf"^{T}xf32$"),
    ],
    # Written over the logits (dc-in-place-at-peak): they are its output.
    "cross-entropy backward": [
        ("elementwise", r"^index_cast cmpi select", rf"(^| ){T}x{V}xbf16"),
    ],
    # A rotation of q (or k) reads its partner half; the forward selects
    # the negated product for the first half, the backward for the second.
    "rotary forward": [
        ("elementwise", r"^cmpi extf mulf negf select extf mulf addf truncf$",
         r"^4x2048x16x2x64xbf16 2048x64xf32$",
         r"(%\w+) = arith\.negf .*arith\.select %\w+, \1,"),
    ],
    "rotary backward": [
        ("elementwise", r"^cmpi extf mulf negf select extf mulf addf truncf$",
         r"^4x2048x16x2x64xbf16 2048x64xf32$",
         r"(%\w+) = arith\.negf .*arith\.select %\w+, %\w+, \1 "),
    ],
}

MATMUL = re.compile(
    r"linalg\.matmul(?: indexing_maps = \[(#\w+), (#\w+), (#\w+)\])? "
    r"ins\([^:]*: tensor<(\d+)x(\d+)xbf16>, tensor<(\d+)x(\d+)xbf16>\) "
    r"outs\([^:]*: tensor<(\d+)x(\d+)xbf16>\)")


def _read(path):
    """The text of `path` (closed after reading)."""
    with open(path) as f:
        return f.read()


def kernels(ir, profile):
    """[(kind, body, types, seconds)] of the step's counted ops."""
    ops = profile_by_kind.step_ops(ir)["train_step"]
    times = json.loads(_read(profile))["ops"]
    counted = [op for op in ops if profile_by_kind.is_counted(op[0])]
    result = []
    for i, (name, text) in enumerate(counted):
        kind = profile_by_kind.classify(name, text)
        body = " ".join(m.split(".")[1] for m in
                        re.findall(r"(?:arith|math)\.\w+", text))
        types = " ".join(dict.fromkeys(re.findall(r"tensor<([^>]*)>", text)))
        result.append((kind, body, types, text,
                       times.get(f"train_step:{i}", 0.0)))
    return result


def matmul_key(text, maps):
    """(m, n, k, A transposed, B transposed) of a bf16 linalg.matmul."""
    found = MATMUL.search(text.replace("\n", " "))
    if not found:
        return None
    ma, mb, _, a0, a1, _, _, m, n = found.groups()
    ta = bool(ma) and maps[ma].endswith("(d2, d0)")
    tb = bool(mb) and maps[mb].endswith("(d1, d2)")
    return int(m), int(n), int(a0 if ta else a1), ta, tb


def affine_maps(ir):
    return dict(re.findall(r"^(#\w+) = affine_map<(.*)>$", _read(ir),
                           re.M))


def gemm_shapes(ir):
    """The step's distinct bf16 matrix products and how often each occurs."""
    maps = affine_maps(ir)
    counts = collections.Counter()
    for name, text in profile_by_kind.step_ops(ir)["train_step"]:
        key = matmul_key(text, maps) if name == "linalg.matmul" else None
        if key:
            counts[key] += 1
    return [dict(m=m, n=n, k=k, ta=ta, tb=tb, count=c)
            for (m, n, k, ta, tb), c in counts.items()]


def mean_dc_times(ir, profile):
    """Mean time of each kernel of NAMED, per name (None: one not found)."""
    found = kernels(ir, profile)
    result = {}
    for name, parts in NAMED.items():
        total = 0.0
        for kind, body, types, *text in parts:
            times = [t for k, b, ty, op, t in found if k == kind and
                     re.search(body, b) and re.search(types, ty) and
                     (not text or re.search(text[0], op, re.S))]
            if not times:
                total = None
                break
            total += sum(times) / len(times)
        result[name] = total
    return result, found


def compare(runs):
    """The named ops' mean times in several profiled builds of one step:
    runs is [(label, IR, profile)]; a markdown table, a column per run."""
    times = [(label, mean_dc_times(ir, profile)[0])
             for label, ir, profile in runs]
    print("| op | " + " | ".join(label for label, _ in times) + " |")
    print("|---|" + "---|" * len(times))
    for name in NAMED:
        cells = [f"{t[name] * 1e6:.1f} us" if t[name] is not None else "-"
                 for _, t in times]
        print(f"| {name} | " + " | ".join(cells) + " |")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gemms", metavar="IR", help="print the step's "
                        "matrix products as JSON for kernel_bench.py")
    parser.add_argument("ir", nargs="?")
    parser.add_argument("profile", nargs="?")
    parser.add_argument("peer", nargs="?")
    parser.add_argument("--extra", nargs=2, metavar=("IR", "PROFILE"),
                        help="another profiled step for the named ops "
                        "that the first lacks")
    parser.add_argument("--compare", nargs="+", metavar="LABEL=IR,PROFILE",
                        help="the named ops' times in several profiled "
                        "builds of one step, side by side")
    args = parser.parse_args()
    if args.compare:
        compare([(label, *paths.split(",")) for label, paths in
                 (run.split("=", 1) for run in args.compare)])
        return
    if args.gemms:
        json.dump(gemm_shapes(args.gemms), sys.stdout, indent=1)
        return
    peer = json.loads(_read(args.peer))
    copy = peer["copy_bytes_per_s"]
    print(f"peer: torch {peer['torch']} on {peer['device']}; copy bandwidth "
          f"{copy / 1e12:.2f} TB/s")
    dc, found = mean_dc_times(args.ir, args.profile)
    if args.extra:
        more, _ = mean_dc_times(*args.extra)
        dc = {name: mine if mine is not None else more[name]
              for name, mine in dc.items()}
    print("\n| op (config A's shapes) | dc | dc bandwidth (share of copy) "
          "| Inductor | Inductor bandwidth | dc / Inductor "
          "| copy of the same bytes (share of copy) | dc / that copy |")
    print("|---|---|---|---|---|---|---|---|")
    for name, mine in dc.items():
        theirs = peer["ops"].get(name)
        if theirs is None:  # a peer JSON from before the op was measured
            continue
        least = theirs["bytes"]
        ms = theirs["inductor_ms"]
        if mine is None:
            print(f"| {name} | (not found in the step) | | {ms * 1e3:.1f} us "
                  f"| {least / ms / 1e9:.2f} TB/s | | | |")
            continue
        # A peer JSON from before the same-size copies has none.
        same = theirs.get("copy_same_bytes_ms")
        same_cols = (f"{same * 1e3:.1f} us ({least / same * 1e3 / copy:.0%}) "
                     f"| {mine * 1e3 / same:.2f}x" if same else "|")
        print(f"| {name} | {mine * 1e6:.1f} us | {least / mine / 1e12:.2f} "
              f"TB/s ({least / mine / copy:.0%}) | {ms * 1e3:.1f} us | "
              f"{least / ms / 1e9:.2f} TB/s ({least / ms * 1e3 / copy:.0%}) "
              f"| {mine * 1e3 / ms:.2f}x | {same_cols} |")
    # Matrix products: dc's mean time per distinct shape in the step.
    maps = affine_maps(args.ir)
    per_shape = collections.defaultdict(list)
    for kind, _, _, text, t in found:
        key = matmul_key(text, maps) if kind == "matrix products" else None
        if key:
            per_shape[key].append(t)
    print("\n| product m x n x k (transposed) | count | dc (cuBLASLt) "
          "| torch.matmul | dc TFLOP/s | torch / dc |")
    print("|---|---|---|---|---|---|")
    total_dc = total_torch = 0.0
    for gemm in peer["gemms"]:
        key = (gemm["m"], gemm["n"], gemm["k"], gemm["ta"], gemm["tb"])
        times = per_shape.get(key)
        if not times:
            continue
        mine = sum(times) / len(times)
        flops = 2 * gemm["m"] * gemm["n"] * gemm["k"]
        theirs = gemm["torch_ms"] * 1e-3
        total_dc += mine * len(times)
        total_torch += theirs * len(times)
        trans = "".join(("A" if gemm["ta"] else "") + ("B" if gemm["tb"] else ""))
        print(f"| {gemm['m']} x {gemm['n']} x {gemm['k']} ({trans or '-'}) "
              f"| {len(times)} | {mine * 1e6:.1f} us | {theirs * 1e6:.1f} us "
              f"| {flops / mine / 1e12:.0f} | {theirs / mine:.3f} |")
    if total_dc:
        print(f"\nall products of the step: dc {total_dc * 1e3:.2f} ms, "
              f"torch.matmul {total_torch * 1e3:.2f} ms: dc at "
              f"{total_torch / total_dc:.1%} of torch.matmul's speed")


if __name__ == "__main__":
    main()
