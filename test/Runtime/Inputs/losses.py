#!/usr/bin/env python3
"""Compares the "step=N loss=X" lines of dc-run logs.

  losses.py [--rtol R] [--field F] REFERENCE RUN...
Every RUN must report the same steps as REFERENCE with losses (or the
step lines' F=X values, e.g. grad_norm) within R (relative). Several RUN files given with --concat are joined first (a run
resumed from a checkpoint), then compared as one.
"""
import argparse
import re
import sys

def read(path, field="loss"):
    line_re = re.compile(r"^step=(\d+) (?:.* )?%s=(\S+)" % re.escape(field))
    losses = {}
    with open(path) as log:
        for line in log:
            match = line_re.match(line)
            if match:
                losses[int(match.group(1))] = float(match.group(2))
    if not losses:
        sys.exit("%s: no step lines" % path)
    return losses


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rtol", type=float, default=1e-5)
    parser.add_argument("--field", default="loss",
                        help="the step lines' value to compare")
    parser.add_argument("--concat", action="store_true",
                        help="join the RUN files into one run")
    parser.add_argument("reference")
    parser.add_argument("runs", nargs="+")
    args = parser.parse_args()
    reference = read(args.reference, args.field)
    runs = [(path, read(path, args.field)) for path in args.runs]
    if args.concat:
        joined = {}
        for _, losses in runs:
            joined.update(losses)
        runs = [("+".join(args.runs), joined)]
    failed = False
    worst = 0.0
    for path, losses in runs:
        if sorted(losses) != sorted(reference):
            print("%s: steps %s, reference has %s" %
                  (path, sorted(losses), sorted(reference)))
            failed = True
            continue
        for step in sorted(reference):
            want, got = reference[step], losses[step]
            worst = max(worst, abs(got - want) / max(abs(want), 1e-30))
            if abs(got - want) > args.rtol * abs(want):
                print("%s: step %d %s %.9g, reference %.9g" %
                      (path, step, args.field, got, want))
                failed = True
    if failed:
        sys.exit(1)
    what = "losses" if args.field == "loss" else args.field
    print("%s agree: %d runs, %d steps (largest relative difference "
          "%.3g)" % (what, len(runs), len(reference), worst))


if __name__ == "__main__":
    main()
