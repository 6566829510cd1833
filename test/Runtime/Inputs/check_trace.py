#!/usr/bin/env python3
"""Checks a dc-run Chrome trace and profile.

  check_trace.py TRACE RANKS [PROFILE]
The trace must be JSON with complete ("X") spans of real, non-negative
times on every rank, on the compute, collective and copy tracks, and lanes
of one track must not overlap. The profile must be the cost model's format.
Prints a short summary for FileCheck.
"""
import collections
import json
import sys


def main():
    trace_path, ranks = sys.argv[1], int(sys.argv[2])
    with open(trace_path) as f:
        events = json.load(f)["traceEvents"]
    threads = {}
    spans = collections.defaultdict(list)
    for event in events:
        if event["ph"] == "M" and event["name"] == "thread_name":
            threads[(event["pid"], event["tid"])] = event["args"]["name"]
        elif event["ph"] == "X":
            assert event["ts"] >= 0 and event["dur"] >= 0, event
            spans[(event["pid"], event["tid"])].append(event)
    pids = sorted({pid for pid, _ in spans})
    assert pids == list(range(ranks)), pids
    for key, lane in spans.items():
        assert key in threads, key
        lane.sort(key=lambda e: e["ts"])
        if threads[key].startswith("compute"):
            continue  # nested spans (step > entry) are fine there
        for before, after in zip(lane, lane[1:]):
            # A lane holds spans one after another (Chrome rounds to 1 ns).
            assert before["ts"] + before["dur"] <= after["ts"] + 1e-3, (
                threads[key], before, after)
    for rank in range(ranks):
        tracks = sorted({threads[key].split(" #")[0]
                         for key in spans if key[0] == rank})
        names = sorted({e["name"] for key in spans if key[0] == rank
                        for e in spans[key]})
        print("rank %d tracks: %s" % (rank, ", ".join(tracks)))
        print("rank %d spans: %s" % (rank, ", ".join(names)))
    if len(sys.argv) > 3:
        with open(sys.argv[3]) as f:
            profile = json.load(f)
        assert list(profile) == ["ops"], profile
        for key, seconds in sorted(profile["ops"].items()):
            function, ordinal = key.rsplit(":", 1)
            assert function and ordinal.isdigit() and seconds > 0, key
            print("profile %s" % key)


if __name__ == "__main__":
    main()
