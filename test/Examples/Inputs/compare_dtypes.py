#!/usr/bin/env python3
"""Runs the f32 and the bf16 variant of one training step on the same inputs
and checks that the bf16 loss and gradients agree with the f32 ones to bf16
accuracy.

Both modules must have the same signature up to the element type. The inputs
are seeded values rounded to bf16, so both variants see identical numbers.
For the loss the check is |L16 - L32| <= loss_rtol |L32|; for each gradient
||g16 - g32|| <= grad_rtol ||g32|| (2-norms). Exits 1 when a check fails.
"""

import argparse
import math
import random
import struct
import sys

from gradcheck import (dense, initial_values, lower_and_run, print_tensors,
                       signature, step_source, tensor_type)


def bf16(x):
    """Rounds an f32 value to the nearest bf16 (ties to even)."""
    bits = struct.unpack("I", struct.pack("f", x))[0]
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("f", struct.pack("I", bits))[0]


def run_step(text, values):
    args, result_types = signature(text)
    lines = ["func.func private @printMemrefF32(memref<*xf32>)",
             "func.func @main() {"]
    for a, (_, shape, elt, _) in enumerate(args):
        lines.append(f"  %v{a} = arith.constant {dense(values[a], shape, elt)}")
    arg_types = ", ".join(tensor_type(s, e) for _, s, e, _ in args)
    lines.append(f"  %r:{len(result_types)} = call @train_step("
                 f"{', '.join(f'%v{a}' for a in range(len(args)))}) : "
                 f"({arg_types}) -> ({', '.join(result_types)})")
    lines += print_tensors([(f"%r#{i}", t) for i, t in enumerate(result_types)])
    lines += ["  return", "}"]
    return args, lower_and_run(step_source(text) + "\n".join(lines) + "\n")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("f32_input")
    ap.add_argument("bf16_input")
    ap.add_argument("--int-max", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--loss-rtol", type=float, default=1e-2)
    ap.add_argument("--grad-rtol", type=float, default=6e-2)
    opts = ap.parse_args(argv)
    texts = []
    for path in (opts.f32_input, opts.bf16_input):
        with open(path) as f:
            texts.append(f.read())
    args, _ = signature(texts[0])
    values = initial_values(args, random.Random(opts.seed), opts.int_max)
    values = [v if elt == "i32" else [bf16(x) for x in v]
              for v, (_, _, elt, _) in zip(values, args)]
    _, wide = run_step(texts[0], values)
    _, narrow = run_step(texts[1], values)
    names = ["loss"] + [name for name, _, _, is_param in args if is_param]
    failures, worst = 0, 0.0
    for i, (name, g32, g16) in enumerate(zip(names, wide, narrow)):
        ref = math.sqrt(sum(x * x for x in g32))
        err = math.sqrt(sum((x - y) ** 2 for x, y in zip(g32, g16)))
        rel = err / ref if ref else err
        ok = rel <= (opts.loss_rtol if i == 0 else opts.grad_rtol)
        worst = max(worst, rel)
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name:28} rel {rel:.3e}")
    print(f"results {len(names)} failed {failures} max-rel-error {worst:.3e}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
