"""The table of bench/gpu_budget_bench.sh: each step bench/pack-budget-
artifacts.sh compiled, dc-report's prediction (ART/NAME-report.txt) beside
dc-run's measurement (OUT/NAME.log: median time_ms of steps 4 to the last,
the last step's peaks; single steps of config A vary by +-3% on an H200,
so a run of 6 steps gives a median of 3).

  python3 bench/budget_table.py ART OUT"""

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


def gib(b):
    return "-" if b is None else f"{b / 2**30:.2f}"


def main(argv=None):
    art, out = (argv or sys.argv[1:])[:2]
    names = sorted((n[:-len("-report.txt")] for n in os.listdir(art)
                    if n.endswith("-report.txt")),
                   key=lambda n: (n != "none", int(n.split("-")[1]) if "-" in n else 0, n))
    base_p = predicted(os.path.join(art, "none-report.txt"))
    base_m = measured(os.path.join(out, "none.log"))
    print("| plan | cut | recomputed (GiB) | offloaded (GiB) | trainer step predicted (ms) | measured (ms) | measured / predicted | overhead predicted | overhead measured | peak planned: step + state (GiB) | pools measured (GiB) | pools <= step planned | device measured (GiB) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in names:
        p = predicted(os.path.join(art, f"{name}-report.txt"))
        m = measured(os.path.join(out, f"{name}.log"))
        plan, _, cut = name.partition("-")
        row = [plan, f"-{cut}%" if cut else "-", gib(p["recomputed"]),
               gib(p["offloaded"]), f"{p['trainer']:.2f}"]
        if m:
            row += [f"{m['time']:.2f}", f"{m['time'] / p['trainer']:.3f}",
                    f"{(p['trainer'] / base_p['trainer'] - 1) * 100:+.1f}%",
                    f"{(m['time'] / base_m['time'] - 1) * 100:+.1f}%" if base_m else "-",
                    f"{gib(p['step_peak'])} + {gib(p['peak'] - p['step_peak'])}",
                    gib(m["pools"]),
                    "yes" if m["pools"] <= p["step_peak"] else "NO",
                    gib(m["device"])]
        else:
            row += ["FAILED", "-", f"{(p['trainer'] / base_p['trainer'] - 1) * 100:+.1f}%",
                    "-", f"{gib(p['step_peak'])} + {gib(p['peak'] - p['step_peak'])}",
                    "-", "-", "-"]
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
