"""The PyTorch side of the frontend tests.

  reference MODULE:FACTORY --batch B --seq S --tokens FILE -o REF
      writes a token file (int32, what dc-run --data reads) and REF, a
      safetensors file with PyTorch's loss ("loss") and gradients of step 1
      of dc-run's data (row g of the global batch: tokens [g S, g S + S),
      targets shifted by one), from the weights `python3 -m dc_torch export`
      writes for the same factory and seed. The loss is next-token
      cross-entropy, plus config.router_aux_loss_coef * aux_loss where the
      model's output has an aux_loss (Hugging Face's MoE loss).
      --ranks N: the data-parallel step of N ranks, each on B / N rows:
      the mean of their losses and gradients, what dc-run reports. For a
      loss that is not a mean over tokens (the auxiliary loss) or routing
      that depends on the batch (a capacity) it differs from one step on
      B rows. --moe-capacity-factor C: every MoE block with a
      capacity_factor (families.py) drops the assignments past
      ceil(C T k / E) per expert: the test's own reference of the rule
      dc_torch implements.
  compare REF GRADS LOG [--rtol R --atol A]
      compares the loss of LOG's step 1 (dc-run's output) and every gradient
      in GRADS (dc-run --save-grads) with REF; prints the worst errors. A
      NaN on either side fails.
      Elementwise |have - want| <= atol + rtol |want|, or with --norm-rtol R
      (a bf16 step against f32 PyTorch) |have - want| <= R |want| in 2-norm
      per tensor."""

import argparse
import importlib
import re
import sys

import torch

from dc_torch.safetensors import read_safetensors, write_safetensors
from dc_torch.trace import StepParameters, default_loss


def reference(args):
    module, _, factory = args.factory.partition(":")
    torch.manual_seed(args.seed)
    model = getattr(importlib.import_module(module), factory)()
    vocab = next(m.num_embeddings for m in model.modules()
                 if isinstance(m, torch.nn.Embedding))
    g = torch.Generator().manual_seed(1234)
    stream = torch.randint(0, vocab, (args.batch * args.seq + 64,),
                           generator=g, dtype=torch.int32)
    stream.numpy().tofile(args.tokens)
    s = args.seq
    rows = [stream[i * s:i * s + s + 1].long() for i in range(args.batch)]
    tokens = torch.stack([r[:-1] for r in rows])
    targets = torch.stack([r[1:] for r in rows])
    if args.moe_capacity_factor is not None:
        blocks = [m for m in model.modules() if hasattr(m, "capacity_factor")]
        if not blocks:
            sys.exit(f"{args.factory} has no MoE block with a capacity_factor")
        for block in blocks:
            block.capacity_factor = args.moe_capacity_factor
    params = StepParameters(model).trainable
    if args.batch % args.ranks:
        sys.exit(f"--batch {args.batch} is not a multiple of --ranks")
    rows_per_rank = args.batch // args.ranks
    loss, grads = 0.0, [0.0] * len(params)
    for r in range(args.ranks):
        shard = slice(r * rows_per_rank, (r + 1) * rows_per_rank)
        rank_loss = hf_loss(model, model(tokens[shard]), targets[shard])
        rank_grads = torch.autograd.grad(rank_loss, [p for _, p in params])
        loss = loss + rank_loss.detach() / args.ranks
        grads = [g + rg / args.ranks for g, rg in zip(grads, rank_grads)]
    out = {"loss": loss.reshape(1)}
    out.update({name: g for (name, _), g in zip(params, grads)})
    write_safetensors(args.output, out)


def hf_loss(model, output, targets):
    """A Hugging Face *ForCausalLM's loss with labels: cross-entropy, plus
    router_aux_loss_coef * aux_loss where the model returns an aux_loss."""
    if not hasattr(output, "logits"):
        return default_loss(output, targets)
    loss = default_loss(output.logits, targets)
    if getattr(output, "aux_loss", None) is not None:
        loss = loss + model.config.router_aux_loss_coef * output.aux_loss
    return loss


def compare(args):
    ref = read_safetensors(args.ref)
    got = read_safetensors(args.grads)
    log = open(args.log).read()
    match = re.search(r"^step=1 loss=(\S+)", log, re.M)
    if not match:
        sys.exit(f"no 'step=1 loss=' line in {args.log}")
    failures = 0

    def check(name, want, have):
        nonlocal failures
        have = have.float()
        want = want.float()
        if have.shape != want.shape:
            print(f"FAIL {name}: shape {list(have.shape)} != "
                  f"{list(want.shape)}")
            failures += 1
            return
        err = (have - want).abs()
        # Each bound as `not err <= bound`: a NaN (in the step's loss or
        # gradients, or in PyTorch's) fails, where `err - bound > 0` let it
        # pass.
        if args.norm_rtol is not None:
            if not float(err.norm()) <= args.norm_rtol * float(want.norm()):
                failures += 1
                print(f"FAIL {name}: relative 2-norm error "
                      f"{float(err.norm() / want.norm()):.3g}")
            return float(err.norm() / want.norm())
        bound = args.atol + args.rtol * want.abs()
        if not bool((err <= bound).all()):
            failures += 1
            print(f"FAIL {name}: max abs error {float(err.max()):.3g}")
        return float(err.max())

    loss_err = check("loss", ref["loss"], torch.tensor([float(match[1])]))
    names = [n for n in ref if n != "loss"]
    missing = [n for n in names if n not in got]
    for n in missing:
        print(f"FAIL {n}: no gradient in {args.grads}")
    failures += len(missing)
    worst = max(check(n, ref[n], got[n]) or 0 for n in names if n in got)
    print(f"compared loss and {len(names)} gradients: {failures} failed "
          f"(loss error {loss_err:.2g}, worst gradient error {worst:.2g})")
    sys.exit(1 if failures else 0)


def main(argv=None):
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("reference")
    r.add_argument("factory")
    r.add_argument("--batch", type=int, required=True)
    r.add_argument("--seq", type=int, required=True)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--ranks", type=int, default=1)
    r.add_argument("--moe-capacity-factor", type=float)
    r.add_argument("--tokens", required=True)
    r.add_argument("-o", dest="output", required=True)
    c = sub.add_parser("compare")
    c.add_argument("ref")
    c.add_argument("grads")
    c.add_argument("log")
    c.add_argument("--rtol", type=float, default=1e-5)
    c.add_argument("--atol", type=float, default=1e-5)
    c.add_argument("--norm-rtol", type=float)
    args = ap.parse_args(argv)
    (reference if args.command == "reference" else compare)(args)


if __name__ == "__main__":
    main()
