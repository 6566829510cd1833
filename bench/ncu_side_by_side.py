#!/usr/bin/env python3
"""The table of bench/gpu_inductor_ncu.sh: for each memory-bound op of a
Llama step at config A's shapes, Nsight Compute's kernel durations of dc's
generated kernels beside those of torch.compile (Inductor) for the same op,
both measured the same way (kernel time alone, no launch gaps; the same
clock and cache control), with the DRAM bytes each moved.

dc's kernels come from a compiled step (KERNELS.json from
bench/kernel_names.py names the op each kernel computes); an op that
appears several times in the step (two layers, queries and keys) takes the
median of its instances over the profiled steps. Inductor's come from
kernel_bench.py --ncu-marks, each call's kernels closed by a marker kernel
(spin_kernel); an op called several times takes the median of its calls.

  python3 bench/ncu_side_by_side.py KERNELS.json DC.csv INDUCTOR.csv"""
import csv
import json
import re
import statistics
import sys

def _norm_backward(name):
    """A norm backward's instance: its row group and its weight gradient's
    second pass share the name before _dot / _dw32."""
    return re.sub(r"_(dot|dw32)$", "", name)


# Op -> (pattern of the SSA names of its kernels, how to group them into one
# instance of the op: the part of the name the instance's kernels share).
OPS = [
    ("rmsnorm forward", r"norm_sumsq$", lambda n: n),
    # The backward's row group and its weight gradient's second pass: the
    # final norm's alone, as Inductor's op; a layer's norm adds the residual
    # stream's gradient into its input gradient (one more row read), which
    # Inductor's "+ residual" op does too.
    ("rmsnorm backward", r"^d_final_norm_(dot|dw32)$", _norm_backward),
    ("rmsnorm backward + residual", r"^d_l\d+_(attn|mlp)_norm_(dot|dw32)$",
     _norm_backward),
    ("swiglu forward", r"mlp_act$", lambda n: n),
    ("swiglu backward", r"mlp_dgate$", lambda n: n),
    ("residual add", r"h_(attn|out)$", lambda n: n),
    # The per-row statistics and the loss's sum.
    ("cross-entropy forward", r"^(logits_max|nll_sum)$", lambda n: "loss"),
    ("cross-entropy backward", r"^dlogits$", lambda n: n),
    ("rotary forward", r"_rot$", lambda n: n),
    ("rotary backward", r"_unrot$", lambda n: n),
]
TIME = "gpu__time_duration.sum"
READ, WRITE = "dram__bytes_read.sum", "dram__bytes_write.sum"


def ncu_rows(path):
    """The raw page's rows as dicts, values in us and bytes."""
    with open(path, errors="replace") as f:
        lines = f.read().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID"'))
    rows = list(csv.reader(lines[start:]))
    head, units = rows[0], rows[1]
    scale = {"ns": 1e-3, "us": 1.0, "usecond": 1.0, "msecond": 1e3, "ms": 1e3,
             "nsecond": 1e-3, "byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9}
    out = []
    for row in rows[2:]:
        if len(row) != len(head):
            continue
        record = {"kernel": row[head.index("Kernel Name")]}
        for key in (TIME, READ, WRITE):
            if key in head:
                value = float(row[head.index(key)].replace(",", ""))
                record[key] = value * scale.get(units[head.index(key)], 1)
        out.append(record)
    return out


def marks(path):
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("ncu-marks "):
                return json.loads(line[len("ncu-marks "):])
    sys.exit(f"{path}: no ncu-marks line (kernel_bench.py --ncu-marks)")


def dc_side(names, rows):
    """Op -> (median us of an instance, median DRAM bytes, samples). A
    profile of several steps launches each kernel once a step: the n-th
    launches of an instance's kernels sum to its n-th sample."""
    result = {}
    for op, pattern, instance in OPS:
        launches = {}  # instance -> kernel -> [(us, bytes)] in launch order
        for row in rows:
            name = names.get(row["kernel"])
            if name and re.search(pattern, name):
                launches.setdefault(instance(name), {}).setdefault(row["kernel"], []).append(
                    (row[TIME], row.get(READ, 0) + row.get(WRITE, 0)))
        samples = []
        for kernels in launches.values():
            for step in range(min(len(times) for times in kernels.values())):
                samples.append((sum(times[step][0] for times in kernels.values()),
                                sum(times[step][1] for times in kernels.values())))
        if samples:
            result[op] = (statistics.median(s[0] for s in samples),
                          statistics.median(s[1] for s in samples), len(samples))
    return result


def inductor_side(marked, rows):
    """Op -> (median us of a call, median DRAM bytes, calls, kernels a
    call): the kernels before each marker are one call of the marked op."""
    calls, current, index = {}, [], 0
    for row in rows:
        if "spin_kernel" in row["kernel"]:
            if index < len(marked):
                calls.setdefault(marked[index]["op"], []).append(current)
            current, index = [], index + 1
        else:
            current.append(row)
    return {op: (statistics.median(sum(r[TIME] for r in call) for call in group),
                 statistics.median(sum(r.get(READ, 0) + r.get(WRITE, 0) for r in call)
                                   for call in group),
                 len(group), max(len(call) for call in group))
            for op, group in calls.items()}


def main():
    with open(sys.argv[1]) as f:
        names = json.load(f)
    dc = dc_side(names, ncu_rows(sys.argv[2]))
    marked = marks(sys.argv[3])
    peer = inductor_side(marked, ncu_rows(sys.argv[3]))
    print("| op | dc (median of samples) | Inductor (median of calls, kernels a call) | "
          "dc / Inductor | DRAM bytes dc | DRAM bytes Inductor | least bytes |")
    print("|---|---|---|---|---|---|---|")
    seen = set()
    for entry in marked:
        op = entry["op"]
        if op in seen:
            continue
        seen.add(op)
        mine, theirs = dc.get(op), peer.get(op)
        cells = [op]
        cells.append(f"{mine[0]:.1f} us ({mine[2]} x)" if mine else "-")
        cells.append(f"{theirs[0]:.1f} us ({theirs[2]} x, {theirs[3]} kernels)"
                     if theirs else "-")
        cells.append(f"{mine[0] / theirs[0]:.3f}x" if mine and theirs and theirs[0] else "-")
        cells.append(f"{mine[1] / 2**20:.0f} MiB" if mine else "-")
        cells.append(f"{theirs[1] / 2**20:.0f} MiB" if theirs else "-")
        cells.append(f"{entry['bytes'] / 2**20:.0f} MiB")
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
