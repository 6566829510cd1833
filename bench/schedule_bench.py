#!/usr/bin/env python3
"""dc's compile-time and schedule-quality benchmarks (no GPU needed).

1. Compile time of the full dc-zero3-pipeline on generated Llama-style steps
   of 8, 32 and 128 layers (config B's sizes), wall clock, median of runs,
   with the parse/print-only time subtracted: with the IR verified after
   every pass (dc-opt's default) and once at the end (dc-compile's).
2. Schedule quality predicted with the h200 preset on configs A and B at a
   memory budget no larger than FSDP2's measured peak, for three schedules:
   just in time (no prefetch), prefetch only, and the full pipeline.

Prints Markdown tables; docs/performance.md records dated results.
Usage: python3 bench/schedule_bench.py [--build build] [--runs 3]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

# FSDP2's measured peaks on 2 x H200 (the smaller of eager and compiled), in
# GiB: dc's schedule must fit in no more.
FSDP2_PEAK_GIB = {"A": 15.1, "B": 8.9}


def run(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr.strip()}")
    return proc.stdout


def timed(cmd, runs):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        run(cmd)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def generator_supports_fused_attention(gen):
    return "--attention" in run([gen, "--help"])


def compile_time(build, runs, tmp):
    gen = os.path.join(build, "bin", "dc-gen-llama")
    opt = os.path.join(build, "bin", "dc-opt")
    rows = []
    for layers in (8, 32, 128):
        path = os.path.join(tmp, f"B{layers}.mlir")
        run([gen, "--config", "B", "--dtype", "bf16", "--layers", str(layers),
             "-o", path])
        ops = int(run([opt, path, "--mlir-print-op-generic"]).count("\n"))
        parse = timed([opt, path, "-o", os.devnull], runs)
        full = timed([opt, path, "--dc-zero3-pipeline=world-size=2",
                      "-o", os.devnull], runs)
        # The IR verified once, at the end (as dc-compile runs the pipeline),
        # not after every pass (dc-opt's default).
        once = timed([opt, path, "--dc-zero3-pipeline=world-size=2",
                      "--verify-each=false", "-o", os.devnull], runs)
        rows.append((layers, ops, parse, full, full - parse, once - parse))
    print("| layers | IR lines | parse+print (s) | with pipeline (s) | pipeline (s) | pipeline s per layer | pipeline, verified once (s) |")
    print("|---|---|---|---|---|---|---|")
    for layers, ops, parse, full, pipe, once in rows:
        print(f"| {layers} | {ops} | {parse:.3f} | {full:.3f} | {pipe:.3f} | {pipe / layers * 1e3:.2f} ms | {once:.3f} |")
    base = rows[0]
    for layers, _, _, _, pipe, _ in rows[1:]:
        print(f"\n{layers} vs {base[0]} layers: {layers / base[0]:.0f}x the layers, "
              f"{pipe / base[4]:.1f}x the pipeline time", end="")
    print()


def report(opt, path, pipeline):
    """dc-report's JSON for the step the pipeline schedules (its budget: the
    pipeline's, from the module's #dc.target)."""
    out = run([opt, path, f"--dc-zero3-pipeline={pipeline}",
               "--dc-report=json=true", "-o", os.devnull])
    return json.loads(out)[0]


def schedule_quality(build, tmp):
    gen = os.path.join(build, "bin", "dc-gen-llama")
    opt = os.path.join(build, "bin", "dc-opt")
    attention = ["--attention", "fused"] if generator_supports_fused_attention(gen) else []
    print(f"attention form: {'fused (dc.attention)' if attention else 'decomposed (S x S probabilities kept for backward)'}\n")
    print("| config | budget | schedule | step (ms) | compute-only (ms) | step / compute | exposed comm (ms) | exposed % | peak (GiB) |")
    print("|---|---|---|---|---|---|---|---|---|")
    schedules = [("just in time", "prefetch=false selective-gather=false"),
                 ("prefetch", "prefetch=true selective-gather=false"),
                 ("prefetch + selective", "prefetch=true selective-gather=true")]
    for config in ("A", "B"):
        path = os.path.join(tmp, f"{config}.mlir")
        run([gen, "--config", config, "--dtype", "bf16", *attention, "-o", path])
        budget = f"{FSDP2_PEAK_GIB[config]}GiB"
        for name, flags in schedules:
            try:
                r = report(opt, path, f"world-size=2 memory-budget={budget} {flags}")
            except RuntimeError as error:
                first = [l for l in str(error).splitlines() if "error:" in l][:1]
                print(f"| {config} | {budget} | {name} | infeasible: {first[0].split('error: ')[-1] if first else error} | | | | | |")
                continue
            step, compute = r["stepSeconds"], r["computeSeconds"]
            exposed = r["exposedCollectiveSeconds"]
            print(f"| {config} | {budget} | {name} | {step * 1e3:.2f} | {compute * 1e3:.2f} | "
                  f"{step / compute:.3f} | {exposed * 1e3:.2f} | {100 * exposed / step:.1f}% | "
                  f"{r['peakDeviceBytes'] / 2**30:.2f} |")


def offload_overhead(build, tmp):
    """Config A at budgets 10-40% under its no-offload peak: the predicted
    step-time overhead of activation offload (with prefetch and selective
    gather on too), and the copy-stall floor no placement can beat (what
    dc-offload-activations records: the bytes over budget at the peak must
    leave before it and come back after it at the host link's bandwidth)."""
    gen = os.path.join(build, "bin", "dc-gen-llama")
    opt = os.path.join(build, "bin", "dc-opt")
    attention = ["--attention", "fused"] if generator_supports_fused_attention(gen) else []
    path = os.path.join(tmp, "A-offload.mlir")
    run([gen, "--config", "A", "--dtype", "bf16", *attention, "-o", path])
    base = report(opt, path, "world-size=2 selective-gather=false")
    peak = base["peakDeviceBytes"]
    step0 = base["stepSeconds"]
    print("| schedule | budget | step (ms) | overhead | exposed copies (ms) | floor (ms) | floor overhead | copies busy (ms) | peak (GiB) | host peak (GiB) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    print(f"| no offload | unlimited | {step0 * 1e3:.2f} | - | 0 | 0 | - | 0 | {peak / 2**30:.2f} | 0 |")
    for cut in (10, 20, 30, 40):
        budget = int(peak * (100 - cut) / 100)
        label = f"{budget / 2**30:.2f} GiB (-{cut}%)"
        try:
            r = report(opt, path, f"world-size=2 memory-budget={budget} offload-activations=true")
        except RuntimeError as error:
            first = [l for l in str(error).splitlines() if "error:" in l][:1]
            print(f"| offload | {label} | infeasible: {first[0].split('error: ')[-1] if first else error} | | | | | | | |")
            continue
        floor = r.get("offloadFloor", {}).get("stallSeconds", 0.0)
        print(f"| offload | {label} | {r['stepSeconds'] * 1e3:.2f} | "
              f"{100 * (r['stepSeconds'] / step0 - 1):.1f}% | {r['exposedCopySeconds'] * 1e3:.2f} | "
              f"{floor * 1e3:.2f} | {100 * floor / step0:.1f}% | "
              f"{r['copySeconds'] * 1e3:.2f} | {r['peakDeviceBytes'] / 2**30:.2f} | {r['peakHostBytes'] / 2**30:.2f} |")


def recompute_overhead(build, tmp):
    """Config A at budgets 20-40% under its no-offload peak: the predicted
    step-time overhead of offload alone, recomputation alone
    (dc-rematerialize) and the joint plan (recompute=true with
    offload-activations=true), prefetch and selective gather on in all."""
    gen = os.path.join(build, "bin", "dc-gen-llama")
    opt = os.path.join(build, "bin", "dc-opt")
    attention = ["--attention", "fused"] if generator_supports_fused_attention(gen) else []
    path = os.path.join(tmp, "A-recompute.mlir")
    run([gen, "--config", "A", "--dtype", "bf16", *attention, "-o", path])
    base = report(opt, path, "world-size=2 selective-gather=false")
    peak, step0 = base["peakDeviceBytes"], base["stepSeconds"]
    print(f"no offload, no recomputation: {step0 * 1e3:.2f} ms, peak {peak / 2**30:.2f} GiB\n")
    print("| plan | budget | step (ms) | overhead | recomputed (GiB) | added compute (ms) | offloaded (GiB) | exposed copies (ms) | exposed comm (ms) | offload-alone floor (ms) | peak (GiB) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    plans = [("offload only", "offload-activations=true"),
             ("recompute only", "recompute=true"),
             ("joint", "recompute=true offload-activations=true")]
    for cut in (20, 30, 40):
        budget = int(peak * (100 - cut) / 100)
        label = f"{budget / 2**30:.2f} GiB (-{cut}%)"
        for name, flags in plans:
            try:
                r = report(opt, path, f"world-size=2 memory-budget={budget} {flags}")
            except RuntimeError as error:
                first = [l for l in str(error).splitlines() if "error:" in l][:1]
                print(f"| {name} | {label} | infeasible: {first[0].split('error: ')[-1] if first else error} | | | | | | | | |")
                continue
            def total(kind, key):
                return sum(a[key] for a in r.get("activations", []) if a["kind"] == kind)
            alone = r.get("offloadAloneFloor", {}).get("stallSeconds")
            print(f"| {name} | {label} | {r['stepSeconds'] * 1e3:.2f} | "
                  f"{100 * (r['stepSeconds'] / step0 - 1):.1f}% | "
                  f"{total('recomputed', 'bytes') / 2**30:.2f} | {total('recomputed', 'addedSeconds') * 1e3:.2f} | "
                  f"{total('offloaded', 'bytes') / 2**30:.2f} | {r['exposedCopySeconds'] * 1e3:.2f} | "
                  f"{r['exposedCollectiveSeconds'] * 1e3:.2f} | "
                  f"{'-' if alone is None else f'{alone * 1e3:.2f}'} | {r['peakDeviceBytes'] / 2**30:.2f} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--recompute-only", action="store_true",
                        help="only the recompute / offload table")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.recompute_only:
            print("## Recompute or offload on config A, 20-40% under its peak (h200 preset, 2 ranks)\n")
            recompute_overhead(args.build, tmp)
            return
        print("## Compile time (config B sizes, bf16, world size 2)\n")
        compile_time(args.build, args.runs, tmp)
        print("\n## Schedule quality (h200 preset, 2 ranks)\n")
        schedule_quality(args.build, tmp)
        print("\n## Activation offload on config A, 10-40% under its peak (h200 preset, 2 ranks)\n")
        offload_overhead(args.build, tmp)
        print("\n## Recompute or offload on config A, 20-40% under its peak (h200 preset, 2 ranks)\n")
        recompute_overhead(args.build, tmp)


if __name__ == "__main__":
    try:
        main()
    except RuntimeError as error:
        sys.exit(str(error))
