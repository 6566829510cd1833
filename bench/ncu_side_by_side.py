#!/usr/bin/env python3
"""The table of bench/gpu_inductor_ncu.sh: for each memory-bound op of a
Llama step at config A's shapes, Nsight Compute's kernel durations of dc's
generated kernels beside those of torch.compile (Inductor) for the same op,
both measured the same way (kernel time alone, no launch gaps; the same
clock and cache control), with the DRAM bytes each moved.

dc's kernels come from a compiled step (KERNELS.json from
bench/kernel_names.py names the op each kernel computes); an op that
appears several times in the step (two layers, queries and keys) takes the
median of its instances. Inductor's come from kernel_bench.py --ncu-marks,
each op's kernels closed by a marker kernel (spin_kernel).

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
    """Op -> (median us of an instance, median DRAM bytes, instances)."""
    result = {}
    for op, pattern, instance in OPS:
        groups = {}
        for row in rows:
            name = names.get(row["kernel"])
            if name and re.search(pattern, name):
                group = groups.setdefault(instance(name), [0.0, 0.0])
                group[0] += row[TIME]
                group[1] += row.get(READ, 0) + row.get(WRITE, 0)
        if groups:
            result[op] = (statistics.median(g[0] for g in groups.values()),
                          statistics.median(g[1] for g in groups.values()),
                          len(groups))
    return result


def inductor_side(ops, rows):
    """Op -> (us, DRAM bytes, kernels): the kernels before each marker."""
    result, current, index = {}, [], 0
    for row in rows:
        if "spin_kernel" in row["kernel"]:
            if index < len(ops):
                result[ops[index]["op"]] = (
                    sum(r[TIME] for r in current),
                    sum(r.get(READ, 0) + r.get(WRITE, 0) for r in current),
                    len(current))
            current, index = [], index + 1
        else:
            current.append(row)
    return result


def main():
    with open(sys.argv[1]) as f:
        names = json.load(f)
    dc = dc_side(names, ncu_rows(sys.argv[2]))
    ops = marks(sys.argv[3])
    peer = inductor_side(ops, ncu_rows(sys.argv[3]))
    print("| op | dc kernels | Inductor kernels | dc / Inductor | DRAM bytes dc | "
          "DRAM bytes Inductor | least bytes |")
    print("|---|---|---|---|---|---|---|")
    for entry in ops:
        op = entry["op"]
        mine, theirs = dc.get(op), peer.get(op)
        cells = [op]
        cells.append(f"{mine[0]:.1f} us ({mine[2]} x)" if mine else "-")
        cells.append(f"{theirs[0]:.1f} us ({theirs[2]} kernels)" if theirs else "-")
        cells.append(f"{mine[0] / theirs[0]:.2f}x" if mine and theirs and theirs[0] else "-")
        cells.append(f"{mine[1] / 2**20:.0f} MiB" if mine else "-")
        cells.append(f"{theirs[1] / 2**20:.0f} MiB" if theirs else "-")
        cells.append(f"{entry['bytes'] / 2**20:.0f} MiB")
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
