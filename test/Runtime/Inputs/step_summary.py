#!/usr/bin/env python3
"""Checks dc-run's summary line against its step lines: the mean over all
steps, and the mean and median of the steps after the first (to the 3
decimals dc-run prints, plus their rounding). Prints what it checked."""
import re
import statistics
import sys

text = open(sys.argv[1]).read()
steps = [(int(s), float(t)) for s, t in
         re.findall(r"^step=(\d+) .*?time_ms=([0-9.]+)", text, re.M)]
found = re.search(r"^summary: (\d+) steps, mean step ([0-9.]+) ms"
                  r"(?:; steps (\d+)-(\d+): mean ([0-9.]+) ms, "
                  r"median ([0-9.]+) ms)?$", text, re.M)
if not found or not steps:
    sys.exit("no summary or no steps")
count, mean = int(found.group(1)), float(found.group(2))
times = [t for _, t in steps]


def near(a, b):
    return abs(a - b) <= 2e-3


if count != len(steps) or not near(mean, statistics.mean(times)):
    sys.exit(f"summary {count} steps, {mean} ms; steps say {len(steps)}, "
             f"{statistics.mean(times)}")
if len(steps) > 1:
    rest = times[1:]
    if found.group(3) is None:
        sys.exit("no steady-state part in the summary")
    first, last = int(found.group(3)), int(found.group(4))
    if (first, last) != (steps[1][0], steps[-1][0]) or \
            not near(float(found.group(5)), statistics.mean(rest)) or \
            not near(float(found.group(6)), statistics.median(rest)):
        sys.exit(f"steady part {found.groups()[2:]} against steps "
                 f"{steps[1][0]}-{steps[-1][0]}, mean "
                 f"{statistics.mean(rest)}, median {statistics.median(rest)}")
print(f"summary agrees: {len(steps)} steps")
