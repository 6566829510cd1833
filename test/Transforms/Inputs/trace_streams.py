#!/usr/bin/env python3
"""Checks which stream each slice of a dc-report Chrome trace lands on.

  trace_streams.py TRACE
The trace must name one process and its four stream threads; every complete
("X") slice must sit on a declared thread whose name is its category, on the
stream its op runs on (gathers, reduce-scatters, all-reduces and all-to-alls on
"collective", offloads on "device-to-host", reloads and uploads on
"host-to-device", everything else, and every "stall: " slice, on "compute"),
and the slices of one stream must not overlap (each stream runs one op at a
time). Prints the process, the threads and, per stream, how many slices of
each op it holds, for FileCheck; exits 1 on the first violation.
"""
import collections
import json
import sys

STREAM_OF = {
    "dc.gather_start": "collective",
    "dc.reduce_scatter_start": "collective",
    "dc.all_to_all": "collective",
    "dc.all_to_all_start": "collective",
    "dc.all_reduce_start": "collective",
    "dc.offload_start": "device-to-host",
    "dc.reload_start": "host-to-device",
    "dc.upload_start": "host-to-device",
}
# Ops that only show as a stall on the compute stream, never as a slice.
STALLING = {"dc.wait", "dc.end_backward", "dc.all_to_all"}


def fail(message):
    print("error: " + message)
    sys.exit(1)


def main():
    with open(sys.argv[1]) as f:
        events = json.load(f)["traceEvents"]
    processes = [e["args"]["name"] for e in events
                 if e["ph"] == "M" and e["name"] == "process_name"]
    threads = {e["tid"]: e["args"]["name"] for e in events
               if e["ph"] == "M" and e["name"] == "thread_name"}
    if len(processes) != 1:
        fail("expected one process, got %r" % processes)
    print("process " + processes[0])
    for tid in sorted(threads):
        print("thread %d %s" % (tid, threads[tid]))

    lanes = collections.defaultdict(list)
    for event in (e for e in events if e["ph"] == "X"):
        stream = threads.get(event["tid"])
        if stream is None:
            fail("slice on undeclared thread %r: %r" % (event["tid"], event))
        if event["cat"] != stream:
            fail("slice of category %r on thread %r: %r" %
                 (event["cat"], stream, event))
        if event["ts"] < 0 or event["dur"] < 0:
            fail("negative time: %r" % event)
        op = event["args"]["op"]
        if event["name"].startswith("stall: "):
            if event["name"] != "stall: " + op or op not in STALLING:
                fail("stall slice of %r: %r" % (op, event))
            expected = "compute"
        else:
            if event["name"] != op:
                fail("slice named %r for op %r" % (event["name"], op))
            expected = STREAM_OF.get(op, "compute")
        if stream != expected:
            fail("%s on %r, expected %r" % (event["name"], stream, expected))
        lanes[stream].append(event)

    for tid in sorted(threads):
        stream = threads[tid]
        lane = sorted(lanes[stream], key=lambda e: (e["ts"], e["dur"]))
        for before, after in zip(lane, lane[1:]):
            # Zero-length slices may share an instant; nothing may overlap.
            if before["ts"] + before["dur"] > after["ts"] + 1e-6:
                fail("overlap on %s: %r and %r" % (stream, before, after))
        counts = collections.Counter(e["name"] for e in lane)
        summary = ", ".join("%s %d" % (name, counts[name])
                            for name in sorted(counts))
        print("%s: %d slices%s" % (stream, len(lane),
                                   ": " + summary if summary else ""))


if __name__ == "__main__":
    main()
