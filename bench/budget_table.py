"""The table of bench/gpu_budget_bench.sh: each step bench/pack-budget-
artifacts.sh compiled, dc-report's prediction (ART/NAME-report.txt) beside
dc-run's measurement (OUT/NAME.log: median time_ms of steps 4 to the last,
the last step's peaks; single steps of config A vary by +-3% on an H200,
so a run of 6 steps gives a median of 3).

Names are PLAN-CUT (the plan may hold dashes: joint-typical-40). With
ROUNDS (gpu_budget_bench.sh), NAME.rK.log is round K of NAME (NAME.log
the first): the measured time is the median over rounds, each round's
overhead is taken against that round's unbudgeted run, and the last
columns list them. Where dc-run wrote a trace (NAME.trace.json, TRACE=1)
the host-to-device copies of at least 1 MiB give the link's rate: median
(slowest) GB/s over the rounds' copies.

  python3 bench/budget_table.py ART OUT"""

import json
import os
import re
import statistics
import sys


def predicted(path):
    with open(path) as f:
        text = f.read()

    def ms(label):
        m = re.search(label + r"\s+([0-9.]+) ms", text)
        return float(m.group(1)) if m else None

    def moved(kind):
        m = re.search(kind + r" activations\s+\d+, [^(\n]*\((\d+) B\)", text)
        return int(m.group(1)) if m else 0
    peak = re.search(r"peak device memory\s+[^(]*\((\d+) B\)", text)
    step = re.search(r"\(step [^(]*\((\d+) B\) \+ optimizer state", text)
    return {"trainer": ms("trainer step"), "step": ms("predicted step"),
            "peak": int(peak.group(1)) if peak else None,
            "step_peak": int(step.group(1)) if step else None,
            "recomputed": moved("recomputed"), "offloaded": moved("offloaded")}


def measured(path):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        steps = {int(m.group(1)): m.group(0) for m in
                 re.finditer(r"^step=(\d+) .*$", f.read(), re.M)}
    if len(steps) < 6:
        return None
    times = [float(re.search(r"time_ms=(\S+)", steps[s]).group(1))
             for s in sorted(steps) if s >= 4]
    last = steps[max(steps)]
    device = re.search(r"device_peak_bytes=(\d+)", last)
    return {"time": statistics.median(times),
            "pools": int(re.search(r"peak_mem_bytes=(\d+)", last).group(1)),
            "device": int(device.group(1)) if device else None}


def rounds(out, name):
    """Paths of NAME's round logs in OUT: NAME.log, then NAME.r2.log, ..."""
    paths = [os.path.join(out, f"{name}.log")]
    k = 2
    while os.path.exists(os.path.join(out, f"{name}.r{k}.log")):
        paths.append(os.path.join(out, f"{name}.r{k}.log"))
        k += 1
    return paths


def copy_rates(paths, category="copy h2d (reload)", min_bytes=2**20):
    """GB/s of each copy of `category` of at least min_bytes in the dc-run
    traces at `paths` (those that exist)."""
    rates = []
    for path in paths:
        if not os.path.exists(path):
            continue
        with open(path) as f:
            data = json.load(f)
        events = data["traceEvents"] if isinstance(data, dict) else data
        for e in events:
            size = (e.get("args") or {}).get("bytes", 0)
            if e.get("ph") == "X" and e.get("cat") == category and \
                    size >= min_bytes and e.get("dur", 0) > 0:
                rates.append(size / (e["dur"] * 1e-6) / 1e9)
    return rates


def gib(b):
    return "-" if b is None else f"{b / 2**30:.2f}"


def main(argv=None):
    art, out = (argv or sys.argv[1:])[:2]
    names = sorted((n[:-len("-report.txt")] for n in os.listdir(art)
                    if n.endswith("-report.txt")),
                   key=lambda n: (n != "none", int(n.rpartition("-")[2]) if "-" in n else 0, n))
    base_p = predicted(os.path.join(art, "none-report.txt"))
    base_runs = [measured(path) for path in rounds(out, "none")]
    base_m = base_runs[0]
    print("| plan | cut | recomputed (GiB) | offloaded (GiB) | trainer step predicted (ms) | measured (ms) | measured / predicted | overhead predicted | overhead measured | peak planned: step + state (GiB) | pools measured (GiB) | pools <= step planned | device measured (GiB) | overhead each round | reloads GB/s median (slowest) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in names:
        # Not run (gpu_budget_bench.sh ONLY=...): no row.
        if name != "none" and not os.path.exists(os.path.join(out, f"{name}.log")):
            continue
        p = predicted(os.path.join(art, f"{name}-report.txt"))
        logs = rounds(out, name)
        runs = [measured(path) for path in logs]
        each = [r["time"] / b["time"] - 1 for r, b in zip(runs, base_runs) if r and b]
        m = runs[0]
        if m and len(runs) > 1 and all(runs):
            m = dict(m, time=statistics.median(r["time"] for r in runs),
                     pools=max(r["pools"] for r in runs))
        rates = copy_rates([path[:-len(".log")] + ".trace.json" for path in logs])
        extra = [" / ".join(f"{o * 100:+.1f}%" for o in each) if len(runs) > 1 else "-",
                 f"{statistics.median(rates):.1f} ({min(rates):.1f})" if rates else "-"]
        plan, _, cut = name.rpartition("-")
        if not plan:
            plan, cut = cut, ""
        row = [plan, f"-{cut}%" if cut else "-", gib(p["recomputed"]),
               gib(p["offloaded"]), f"{p['trainer']:.2f}"]
        if m:
            row += [f"{m['time']:.2f}", f"{m['time'] / p['trainer']:.3f}",
                    f"{(p['trainer'] / base_p['trainer'] - 1) * 100:+.1f}%",
                    (f"{statistics.median(each) * 100:+.1f}%" if len(each) > 1 else
                     f"{(m['time'] / base_m['time'] - 1) * 100:+.1f}%") if base_m else "-",
                    f"{gib(p['step_peak'])} + {gib(p['peak'] - p['step_peak'])}",
                    gib(m["pools"]),
                    "yes" if m["pools"] <= p["step_peak"] else "NO",
                    gib(m["device"])]
        else:
            row += ["FAILED", "-", f"{(p['trainer'] / base_p['trainer'] - 1) * 100:+.1f}%",
                    "-", f"{gib(p['step_peak'])} + {gib(p['peak'] - p['step_peak'])}",
                    "-", "-", "-"]
        print("| " + " | ".join(row + extra) + " |")


if __name__ == "__main__":
    main()
