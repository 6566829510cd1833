#!/usr/bin/env python3
"""The table of bench/dc_vs_fsdp2.sh: dc against PyTorch's peer, from the logs
and JSON files in one or more output folders (later folders win on a name).

  python3 bench/dc_vs_fsdp2_table.py OUT [OUT ...]

Per config (dc's A16 = the peer's A, B = B):
  - dc's step: median of dc-run's time_ms after 2 warm-up steps, of the plain
    schedule (the whole device as budget), against the best FSDP2 variant's
    and replicated torch.compile's median step;
  - peaks: dc-run's device_peak_bytes (pools + parameters, optimizer state,
    data) against the peer's max_memory_allocated; dc's against its plan
    (dc-report: the step's peak + the optimizer state);
  - predicted (dc-report) against measured step;
  - exposed communication, two ways: the 2-rank step minus the 1-rank step
    of the same per-GPU batch, and from the measured trace of the -prof run
    (time the compute stream is idle while a collective runs, inside the
    step's entry);
  - budgets (fit, tight = 0.6x, offload = 0.8x with activation offload) and
    the profile-guided schedule against the plain one;
  - same-start loss curves, when the curves phase ran.
Standard library only.
"""
import glob
import json
import os
import re
import statistics
import sys

STEP = re.compile(r"^(?:\[\d+s\] )?step=(\d+) loss=(\S+) time_ms=(\S+) peak_mem_bytes=(\d+)(?: device_peak_bytes=(\d+))?")
GIB = 2 ** 30


def dc_log(path):
    """Steps of a dc-run log: [(step, loss, ms, pools, device_peak)]."""
    steps = []
    try:
        with open(path, errors="replace") as log:
            for line in log:
                m = STEP.match(line)
                if m:
                    steps.append((int(m.group(1)), float(m.group(2)), float(m.group(3)),
                                  int(m.group(4)), int(m.group(5) or 0)))
    except OSError:
        pass
    return steps


def dc_summary(path):
    steps = dc_log(path)
    if not steps:
        return None
    timed = [s[2] for s in steps[2:]] or [s[2] for s in steps]
    return dict(step_ms=statistics.median(timed), pools=max(s[3] for s in steps),
                device_peak=max(s[4] for s in steps), losses=[s[1] for s in steps])


def load_json(path):
    try:
        with open(path) as f:
            text = f.read().strip()
        try:
            return json.loads(text)
        except ValueError:
            return json.loads(text.splitlines()[-1])
    except (OSError, ValueError, IndexError):
        return None


def union(spans):
    merged = []
    for b, e in sorted(spans):
        if merged and b <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([b, e])
    return merged


def overlap(a, b):
    """Length of the intersection of two merged span lists."""
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        total += max(0.0, hi - lo)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def exposed_from_trace(path):
    """Rank 0, steps after the first: mean ms per step that a collective runs
    while no compute op does, inside the step's entry; and the compute
    stream's idle ms per step."""
    data = load_json(path)
    if data is None:
        return None
    events = data["traceEvents"] if isinstance(data, dict) else data
    spans = [e for e in events if e.get("ph") == "X" and e.get("pid", 0) == 0]
    entries = sorted((e["ts"], e["ts"] + e["dur"]) for e in spans if e["name"] == "entry")[1:]
    if not entries:
        return None
    ops = union((e["ts"], e["ts"] + e["dur"]) for e in spans
                if e.get("cat") == "compute" and e["name"] not in ("step", "entry", "optimizer"))
    comm = union((e["ts"], e["ts"] + e["dur"]) for e in spans
                 if e.get("cat") in ("all-gather", "reduce-scatter", "all-reduce", "all-to-all"))
    exposed = idle = 0.0
    for b, e in entries:
        window = [[b, e]]
        busy = [[max(x, b), min(y, e)] for x, y in ops if y > b and x < e]
        comm_in = [[max(x, b), min(y, e)] for x, y in comm if y > b and x < e]
        idle_spans = []
        cursor = b
        for x, y in busy:
            if x > cursor:
                idle_spans.append([cursor, x])
            cursor = max(cursor, y)
        if cursor < e:
            idle_spans.append([cursor, e])
        idle += sum(y - x for x, y in idle_spans)
        exposed += overlap(union(comm_in), idle_spans)
        del window
    n = len(entries)
    return dict(exposed_ms=exposed / n / 1e3, idle_ms=idle / n / 1e3, steps=n)


def report_params(report):
    """Parameter count of a dc-report: the product of each logical type's dims."""
    total = 0
    for p in report[0]["params"]:
        dims = re.findall(r"(\d+)x", p["type"])
        n = 1
        for d in dims:
            n *= int(d)
        total += n
    return total


def fmt(x, spec=".2f", none="—"):
    return none if x is None else format(x, spec)


def ratio(a, b):
    return None if a is None or b is None or not b else a / b


def main(dirs):
    files = {}
    for d in dirs:
        for path in glob.glob(os.path.join(d, "*")):
            files[os.path.basename(path)] = path
    out = []
    out.append("# dc vs PyTorch FSDP2, 2 GPUs (" + ", ".join(dirs) + ")")
    machine = files.get("machine.txt")
    if machine:
        out.append("")
        with open(machine) as f:
            out.append("machine: " + " / ".join(l.strip() for l in f if l.strip()))
    for dc_name, peer_name in (("A16", "A"), ("B", "B")):
        peers = {}
        for name, path in files.items():
            m = re.fullmatch(r"peer-%s-(.+)\.json" % peer_name, name)
            r = load_json(path) if m else None
            if r and r.get("ok"):
                peers[m.group(1)] = r
        dc = {}
        for name, path in files.items():
            m = re.fullmatch(r"dc-%s-w2-(.+)\.log" % dc_name, name)
            if m:
                s = dc_summary(path)
                if s:
                    dc[m.group(1)] = s
        w1 = dc_summary(files.get("dc-%s-w1.log" % dc_name, ""))
        has_curves = ("curve-dc-%s.log" % dc_name) in files
        if not peers and not dc and not w1 and not has_curves:
            continue
        out += ["", "## config %s (dc %s)" % (peer_name, dc_name), ""]
        out += ["| run | step (ms) | peak (GiB) | note |", "|---|---|---|---|"]
        for name in sorted(peers):
            r = peers[name]
            out.append("| peer %s | %.2f | %.2f | %s params, %.1f TFLOP/s/GPU |" % (
                name, r["step_ms_median"], r["peak_GiB"], r.get("params"), r.get("tflops_per_gpu", 0)))
        for name in sorted(dc):
            s = dc[name]
            report = load_json(files.get("%s-w2-%s.report.json" % (dc_name, name), ""))
            note = ""
            if report:
                r = report[0]
                planned = (r["peakDeviceBytes"] + r.get("trainerStateBytes", 0)) / GIB
                note = "predicted %.2f ms, planned peak %.2f GiB, budget %.1f GiB" % (
                    r["stepSeconds"] * 1e3, planned, r["budgetBytes"] / GIB)
            out.append("| dc %s | %.2f | %.2f | pools %.2f GiB; %s |" % (
                name, s["step_ms"], s["device_peak"] / GIB, s["pools"] / GIB, note))
        if w1:
            out.append("| dc 1 rank (same per-GPU batch) | %.2f | %.2f | no communication |" % (
                w1["step_ms"], w1["device_peak"] / GIB))
        plain_report = load_json(files.get("%s-w2-plain.report.json" % dc_name, ""))
        if plain_report and peers:
            counts = {r.get("params") for r in peers.values()}
            dc_count = report_params(plain_report)
            same = counts == {dc_count}
            out += ["", "Same model: dc %d parameters, peer %s: %s" % (
                dc_count, ", ".join(str(c) for c in sorted(counts, key=str)),
                "equal" if same else "DIFFERENT")]
        fsdp = {k: v for k, v in peers.items() if k.startswith("fsdp2")}
        best = min(fsdp.items(), key=lambda kv: kv[1]["step_ms_median"]) if fsdp else None
        repl = peers.get("replicated_compile")
        plain = dc.get("plain")
        out += ["", "| ratio | value |", "|---|---|"]
        if plain and best:
            out.append("| dc step / best FSDP2 (%s) | %s |" % (best[0], fmt(ratio(plain["step_ms"], best[1]["step_ms_median"]), ".3f")))
            out.append("| dc peak / that FSDP2's peak | %s |" % fmt(ratio(plain["device_peak"] / GIB, best[1]["peak_GiB"]), ".3f"))
        if plain and repl:
            out.append("| dc step / replicated torch.compile | %s |" % fmt(ratio(plain["step_ms"], repl["step_ms_median"]), ".3f"))
        for name, s in sorted(dc.items()):
            report = load_json(files.get("%s-w2-%s.report.json" % (dc_name, name), ""))
            if report:
                r = report[0]
                planned = r["peakDeviceBytes"] + r.get("trainerStateBytes", 0)
                out.append("| dc %s: measured / planned peak | %s |" % (name, fmt(ratio(s["device_peak"], planned), ".3f")))
                out.append("| dc %s: measured / predicted step | %s |" % (name, fmt(ratio(s["step_ms"], r["stepSeconds"] * 1e3), ".3f")))
            if plain and name != "plain":
                out.append("| dc %s step / dc plain step | %s |" % (name, fmt(ratio(s["step_ms"], plain["step_ms"]), ".3f")))
        if plain and w1:
            out.append("| exposed communication (2-rank step - 1-rank step) | %.2f ms |" % (plain["step_ms"] - w1["step_ms"]))
        trace = exposed_from_trace(files.get("%s-w2-prof.trace.json" % dc_name, ""))
        if trace:
            out.append("| exposed communication in the -prof trace (collective while compute idle) | %.2f ms per step (compute idle %.2f ms) |" % (
                trace["exposed_ms"], trace["idle_ms"]))
        curve_dc = dc_summary(files.get("curve-dc-%s.log" % dc_name, ""))
        curve_peer = load_json(files.get("curve-peer-%s.json" % dc_name, ""))
        curve_peer2 = load_json(files.get("curve-peer2-%s.json" % dc_name, ""))
        if curve_dc and curve_peer and curve_peer.get("losses"):
            a, b = curve_dc["losses"], curve_peer["losses"]
            c = (curve_peer2 or {}).get("losses") or []
            n = min(len(a), len(b))
            rel = lambda x, y: abs(x - y) / max(abs(y), 1e-12)
            line = "Same start, same data (%d steps): largest relative loss difference dc vs FSDP2 %.2e" % (
                n, max(rel(x, y) for x, y in zip(a[:n], b[:n])))
            if len(c) >= n:
                line += "; FSDP2 vs itself with foreach AdamW (its noise band) %.2e" % max(
                    rel(x, y) for x, y in zip(c[:n], b[:n]))
            out += ["", line, "", "| step | dc loss | FSDP2 loss | FSDP2, foreach AdamW |", "|---|---|---|---|"]
            out += ["| %d | %.5f | %.5f | %s |" % (i + 1, a[i], b[i], "%.5f" % c[i] if i < len(c) else "—")
                    for i in range(n)]
    print("\n".join(out))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
