#!/usr/bin/env python3
"""Which op each generated kernel of a compiled step computes: reads the IR
dc-compile prints after dc-merge-kernel-modules with --mlir-print-debuginfo
and, for each gpu.launch_func, follows its location back to the line of the
source .mlir and takes the SSA name that line defines (%l0_attn_q_rot).
Prints JSON {kernel name: SSA name}, for bench/gpu_inductor_ncu.sh, which
sets Nsight Compute's kernel durations of dc and of Inductor side by side.

  dc-compile STEP.mlir --target=h200 --mlir-print-ir-after=dc-merge-kernel-modules \\
    --mlir-print-debuginfo -o STEP.so 2> IR.mlir
  python3 bench/kernel_names.py IR.mlir > kernels.json"""
import json
import re
import sys


def main():
    with open(sys.argv[1]) as f:
        text = f.read()
    locs = dict(re.findall(r"^(#loc\d+) = loc\((.*)\)$", text, re.M))
    sources = {}

    def source_line(loc, depth=0):
        value = locs.get(loc, loc)
        file_loc = re.match(r'"([^"]+)":(\d+):\d+', value)
        if file_loc:
            return file_loc.group(1), int(file_loc.group(2))
        inner = re.search(r"(#loc\d+)", value)
        return source_line(inner.group(1), depth + 1) if inner and depth < 8 else None

    names = {}
    for m in re.finditer(r"gpu\.launch_func\s+@\w+::@(\w+) .*loc\((#loc\d+)\)", text):
        where = source_line(m.group(2))
        if not where:
            continue
        path, line = where
        if path not in sources:
            with open(path) as f:
                sources[path] = f.read().splitlines()
        defined = re.match(r"\s*%([\w.]+)", sources[path][line - 1])
        names[m.group(1)] = defined.group(1) if defined else sources[path][line - 1].strip()[:60]
    if not names:
        sys.exit(f"{sys.argv[1]}: no gpu.launch_func with a source location")
    json.dump(names, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
