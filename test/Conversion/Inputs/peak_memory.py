#!/usr/bin/env python3
"""Compares the per-step peak memory dc-run reports ("step=N ... peak_mem_bytes=B").

  peak_memory.py REFERENCE RUN...
Prints the largest peak of each log and fails unless every RUN's largest peak
is no more than REFERENCE's. Each step's peak is the high-water mark of the
runtime's device pools (gather arena, step buffers, staging, step arena,
workspaces) in that step.
"""
import re
import sys

LINE = re.compile(r"^step=(\d+) .*peak_mem_bytes=(\d+)")


def peak(path):
    peaks = []
    with open(path) as log:
        for line in log:
            match = LINE.match(line)
            if match:
                peaks.append(int(match.group(2)))
    if not peaks:
        sys.exit("%s: no step lines with peak_mem_bytes" % path)
    return max(peaks)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    reference = peak(sys.argv[1])
    failed = False
    for path in sys.argv[2:]:
        run = peak(path)
        within = run <= reference
        failed |= not within
        print("%s: peak %d B %s reference %d B" %
              (path, run, "within" if within else "OVER", reference))
    if failed:
        sys.exit(1)
    print("peaks within the reference: %d runs" % (len(sys.argv) - 2))


if __name__ == "__main__":
    main()
