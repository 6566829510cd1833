#!/usr/bin/env python3
"""One measured step beside the predicted one, on the same time axis.

  python3 bench/merge_traces.py MEASURED.json PREDICTED.json OUT.json [--step N] [--rank R]

MEASURED is dc-run's --trace (every rank's streams, many steps); PREDICTED
is dc-report's trace= output (the stream simulator's step, with its memory
counter). Step N (default: the last) of rank R (default 0) is cut out of the
measured trace and shifted to start at 0, like the predicted step; the two
become processes "measured: rank R, step N" and "predicted" of one Chrome /
Perfetto trace, so a stall or a late collective shows as a misaligned span.
Standard library only.
"""
import argparse
import json
import sys


def events_of(path):
    with open(path) as f:
        data = json.load(f)
    return data["traceEvents"] if isinstance(data, dict) else data


def measured_step(events, rank, step):
    """(begin, end) in us of step `step` (1-based; 0 = last) of `rank`."""
    steps = sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                   if e.get("ph") == "X" and e.get("pid") == rank and e.get("name") == "step")
    if not steps:
        sys.exit("%s: no 'step' spans for rank %d (was it written by dc-run --trace?)" % ("measured", rank))
    if step > len(steps):
        sys.exit("measured trace has %d steps; --step %d asked for" % (len(steps), step))
    return steps[step - 1] if step > 0 else steps[-1]


def merge(measured, predicted, rank, step):
    begin, end = measured_step(measured, rank, step)
    number = step if step > 0 else sum(1 for e in measured if e.get("ph") == "X" and e.get("pid") == rank
                                       and e.get("name") == "step")
    out = [{"name": "process_name", "ph": "M", "pid": 0,
            "args": {"name": "measured: rank %d, step %d" % (rank, number)}},
           {"name": "process_sort_index", "ph": "M", "pid": 0, "args": {"sort_index": 0}},
           {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "predicted"}},
           {"name": "process_sort_index", "ph": "M", "pid": 1, "args": {"sort_index": 1}}]
    for e in measured:
        if e.get("pid") != rank:
            continue
        if e.get("ph") == "M":
            if e.get("name") == "thread_name":
                out.append(dict(e, pid=0))
            continue
        if e.get("ph") != "X":
            continue
        lo, hi = max(e["ts"], begin), min(e["ts"] + e["dur"], end)
        if hi <= lo:
            continue
        out.append(dict(e, pid=0, ts=lo - begin, dur=hi - lo))
    for e in predicted:
        if e.get("ph") == "M" and e.get("name") in ("process_name", "process_sort_index"):
            continue
        out.append(dict(e, pid=1))
    return out, (end - begin) / 1e3


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("measured")
    p.add_argument("predicted")
    p.add_argument("out")
    p.add_argument("--step", type=int, default=0, help="measured step, from 1 (default: the last)")
    p.add_argument("--rank", type=int, default=0)
    args = p.parse_args(argv)
    events, step_ms = merge(events_of(args.measured), events_of(args.predicted), args.rank, args.step)
    predicted_end = max((e.get("ts", 0) + e.get("dur", 0)) for e in events if e.get("pid") == 1)
    with open(args.out, "w") as f:
        json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, f)
    print("%s: measured step %.2f ms, predicted %.2f ms" % (args.out, step_ms, predicted_end / 1e3))


if __name__ == "__main__":
    main()
