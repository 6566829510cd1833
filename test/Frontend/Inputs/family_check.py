"""Each decoder family of families.py through dc on the host backend,
against PyTorch: exported by dc_torch, PyTorch's loss and gradients of
step 1 on dc-run's data (torch_step.py reference), then compiled and run
unscheduled on 1 rank and under ZeRO-3 on 2 ranks (the same global batch),
the loss and every gradient compared (torch_step.py compare, 1e-5) with
PyTorch's step of as many ranks (the mean of the ranks' losses and
gradients, each rank on its half of the batch).
Prints one line per family and run; exits 1 if any differs.

  family_check.py --work DIR FAMILY...   (dc-compile, dc-run on PATH)

A FAMILY with a colon is a MODULE:FACTORY of any module on PYTHONPATH.
FAMILY@capacity=C exports with --moe-capacity-factor C and gives the
reference's MoE blocks that capacity (families.py's own dropping rule)."""

import argparse
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BATCH, SEQ = 4, 7


def run(cmd, log=None):
    result = subprocess.run(cmd, capture_output=True, text=True)
    if log:
        with open(log, "w") as f:
            f.write(result.stdout + result.stderr)
    return result


def check(family, args):
    # A family of families.py, or any MODULE:FACTORY on PYTHONPATH.
    name, _, option = family.partition("@")
    factory = name if ":" in name else f"families:{name}"
    export_flags, reference_flags = [], []
    if option:
        key, _, value = option.partition("=")
        if key != "capacity":
            return [f"{family}: unknown option '{option}' FAILED"]
        export_flags = reference_flags = ["--moe-capacity-factor", value]
    work = os.path.join(args.work, family.replace(":", "_").replace(
        "@", "_").replace("=", "_"))
    os.makedirs(work, exist_ok=True)
    py = [sys.executable]
    path = lambda name: os.path.join(work, name)
    step = lambda b, out, *extra: py + [
        "-m", "dc_torch", "export", factory, "--batch", str(b),
        "--seq", str(SEQ), "-o", out, *export_flags, *extra]
    r = run(step(BATCH, path("step.mlir"), "--weights", path("init.safetensors")))
    if r.returncode:
        return [f"{family}: export FAILED: {r.stderr.strip().splitlines()[-1]}"]
    for ranks in (1, 2):
        r = run(py + [os.path.join(HERE, "torch_step.py"), "reference",
                      factory, "--batch", str(BATCH), "--seq", str(SEQ),
                      "--ranks", str(ranks), *reference_flags,
                      "--tokens", path("tokens.bin"),
                      "-o", path(f"ref{ranks}.safetensors")])
        if r.returncode:
            return [f"{family}: PyTorch reference FAILED: {r.stderr.strip()[-300:]}"]
    r = run(step(BATCH // 2, path("step2.mlir")))
    if r.returncode:
        return [f"{family}: export (2 ranks) FAILED: {r.stderr.strip()[-300:]}"]
    lines = []
    # The default target's schedule, its compute on the host backend.
    for ranks, mlir, flags in ((1, "step.mlir", ["--no-schedule"]),
                               (2, "step2.mlir", ["--world-size=2"])):
        so, grads, log = (path(f"w{ranks}.so"), path(f"grads{ranks}.safetensors"),
                          path(f"run{ranks}.log"))
        what = f"{family}, {ranks} rank{'s' * (ranks > 1)}"
        r = run([shutil.which("dc-compile"), path(mlir), *flags,
                 "--lowering=host", "-o", so], path(f"compile{ranks}.log"))
        if r.returncode:
            lines.append(f"{what}: dc-compile FAILED: {r.stderr.strip()[-400:]}")
            continue
        r = run([shutil.which("dc-run"), "--nproc", str(ranks), so,
                 "--init", path("init.safetensors"), "--data", path("tokens.bin"),
                 "--save-grads", grads], log)
        if r.returncode:
            lines.append(f"{what}: dc-run FAILED: {(r.stdout + r.stderr).strip()[-400:]}")
            continue
        r = run(py + [os.path.join(HERE, "torch_step.py"), "compare",
                      path(f"ref{ranks}.safetensors"), grads, log])
        verdict = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else r.stderr
        lines.append(f"{what}: {'ok' if r.returncode == 0 else 'FAILED'}: {verdict}")
        if r.returncode:
            lines += ["  " + l for l in r.stdout.splitlines()[:-1][:8]]
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("families", nargs="+")
    args = ap.parse_args()
    failed = 0
    for family in args.families:
        for line in check(family, args):
            print(line, flush=True)
            failed += "FAILED" in line
    print(f"{len(args.families)} families: "
          f"{'all match PyTorch' if not failed else f'{failed} runs FAILED'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
