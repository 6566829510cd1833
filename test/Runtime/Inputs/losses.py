#!/usr/bin/env python3
"""Compares the "step=N loss=X" lines of dc-run logs.

  losses.py [--rtol R] REFERENCE RUN...
Every RUN must report the same steps as REFERENCE with losses within R
(relative). Several RUN files given with --concat are joined first (a run
resumed from a checkpoint), then compared as one.
"""
import argparse
import re
import sys

LINE = re.compile(r"^step=(\d+) loss=(\S+)")


def read(path):
    losses = {}
    with open(path) as log:
        for line in log:
            match = LINE.match(line)
            if match:
                losses[int(match.group(1))] = float(match.group(2))
    if not losses:
        sys.exit("%s: no step lines" % path)
    return losses


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rtol", type=float, default=1e-5)
    parser.add_argument("--concat", action="store_true",
                        help="join the RUN files into one run")
    parser.add_argument("reference")
    parser.add_argument("runs", nargs="+")
    args = parser.parse_args()
    reference = read(args.reference)
    runs = [(path, read(path)) for path in args.runs]
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
                print("%s: step %d loss %.9g, reference %.9g" %
                      (path, step, got, want))
                failed = True
    if failed:
        sys.exit(1)
    print("losses agree: %d runs, %d steps (largest relative difference "
          "%.3g)" % (len(runs), len(reference), worst))


if __name__ == "__main__":
    main()
