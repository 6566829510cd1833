"""python3 -m dc_torch export MODULE:FACTORY --batch B --seq S [--dtype
{f32,bf16}] [-o step.mlir] [--weights init.safetensors]
[--aux-loss-coef A] [--moe-capacity-factor C]

FACTORY() returns the nn.Module (tokens [B, S] -> logits [B, S, V], or an
output object with .logits); the step's loss is next-token cross-entropy
(targets with -100 ignored), plus A * aux_loss where the output has an
aux_loss (A: the model's router_aux_loss_coef by default)."""

import argparse
import importlib
import sys
import time
import traceback

import torch

from .errors import ExportError
from .export import export
from .safetensors import write_safetensors


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m dc_torch")
    sub = ap.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("export", help="write a model's training step as "
                        "MLIR in dc's input contract, and its weights")
    ex.add_argument("factory", metavar="MODULE:FACTORY")
    ex.add_argument("--batch", type=int, required=True)
    ex.add_argument("--seq", type=int, required=True)
    ex.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    ex.add_argument("--vocab", type=int,
                    help="token ids lie in [0, V) (default: the model's "
                    "first nn.Embedding)")
    ex.add_argument("--seed", type=int, default=0,
                    help="torch.manual_seed before FACTORY() (default 0)")
    ex.add_argument("--aux-loss-coef", type=float,
                    help="weight of the model's auxiliary loss (an output's "
                    ".aux_loss) in the step's loss (default: the model's "
                    "router_aux_loss_coef; 0 leaves it out)")
    ex.add_argument("--moe-capacity-factor", type=float, metavar="C",
                    help="each MoE expert keeps at most ceil(C T k / E) of a "
                    "block's T k assignments, in token order then choice "
                    "order; the rest are dropped (default: dropless, the "
                    "model's own routing)")
    ex.add_argument("-o", dest="output", default="-",
                    help="the MLIR file (default: stdout)")
    ex.add_argument("--weights", help="write the initial parameters here "
                    "(safetensors; dc-run --init reads it)")
    args = ap.parse_args(argv)

    module_name, _, factory_name = args.factory.partition(":")
    if not factory_name:
        ap.error(f"'{args.factory}' is not MODULE:FACTORY")
    try:
        factory = getattr(importlib.import_module(module_name), factory_name)
    except (ImportError, AttributeError) as e:
        print(f"dc_torch: error: cannot load {args.factory}: {e}",
              file=sys.stderr)
        return 1
    torch.manual_seed(args.seed)
    start = time.perf_counter()
    try:
        model = factory()
    except Exception as e:  # the user's code: say where, not a traceback
        frames = traceback.extract_tb(e.__traceback__)
        where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames \
            else ""
        print(f"dc_torch: error: the factory {args.factory} raised "
              f"{type(e).__name__}{where}: {e}", file=sys.stderr)
        return 1
    if not isinstance(model, torch.nn.Module):
        print(f"dc_torch: error: the factory {args.factory} returned "
              f"{type(model).__name__}, not a torch.nn.Module",
              file=sys.stderr)
        return 1
    try:
        exported = export(model, args.batch, args.seq, dtype=args.dtype,
                          vocab=args.vocab, aux_loss_coef=args.aux_loss_coef,
                          moe_capacity_factor=args.moe_capacity_factor)
    except ExportError as e:
        print(f"dc_torch: error: {e}", file=sys.stderr)
        return 1
    seconds = time.perf_counter() - start
    for note in exported.notes:
        print(f"dc_torch: note: {note}", file=sys.stderr)
    try:
        if args.output == "-":
            sys.stdout.write(exported.mlir)
        else:
            with open(args.output, "w") as f:
                f.write(exported.mlir)
        if args.weights:
            write_safetensors(args.weights, exported.weights)
    except OSError as e:
        print(f"dc_torch: error: cannot write {e.filename or args.output}: "
              f"{e.strerror or e}", file=sys.stderr)
        return 1
    print(f"dc_torch: exported {args.factory} in {seconds:.1f} s",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
