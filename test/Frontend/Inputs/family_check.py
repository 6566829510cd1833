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
reference's MoE blocks that capacity (families.py's own dropping rule).

The Python steps (`python3 -m dc_torch export`, torch_step.py reference
and compare) run their command-line entry points (main(argv)) in this
process: one import of torch instead of six per family. Each family's
export log (stdout and stderr, the notes) is DIR/<family>/export.log. The
compiles are the time: two run at once (at most as many as there are
CPUs; FAMILY_CHECK_JOBS=N sets it), beside the next families' exports;
the dc-run jobs (MPI) run one at a time."""

import argparse
import concurrent.futures
import contextlib
import io
import os
import shutil
import subprocess
import sys
import traceback

import dc_torch.__main__
import torch_step

HERE = os.path.dirname(os.path.abspath(__file__))
BATCH, SEQ = 4, 7
# A lit test runs one at a time in its parallelism group (dc-mpi-jobs):
# the machine's other CPU would idle while one compile runs.
# FAMILY_CHECK_JOBS=1: one compile at a time (a machine busy otherwise).
COMPILE_JOBS = int(os.environ.get("FAMILY_CHECK_JOBS") or
                   max(1, min(2, len(os.sched_getaffinity(0)))))


def run(cmd, log=None):
    result = subprocess.run(cmd, capture_output=True, text=True)
    if log:
        with open(log, "w") as f:
            f.write(result.stdout + result.stderr)
    return result


def run_main(main, argv, log=None):
    """A command-line main(argv) in this process, as run() runs a command:
    its exit status (SystemExit's too) and what it printed."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(argv) or 0
        except SystemExit as e:
            status = e.code or 0
            if not isinstance(status, int):  # sys.exit(message)
                print(status, file=sys.stderr)
                status = 1
        except Exception:  # what the interpreter would print, then exit 1
            traceback.print_exc()
            status = 1
    result = subprocess.CompletedProcess(argv, status, out.getvalue(),
                                         err.getvalue())
    if log:
        with open(log, "w") as f:
            f.write(result.stdout + result.stderr)
    return result


def last_line(text):
    lines = text.strip().splitlines()
    return lines[-1] if lines else ""


def prepare(family, args, compiles):
    """Exports the family for 1 and 2 ranks and writes PyTorch's references
    (in this process), then queues both compiles. Returns (work, runs): the
    family's folder and, for each run, its name, rank count and the
    compile's future; or a list of FAILED lines."""
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
    path = lambda name: os.path.join(work, name)
    step = lambda b, out, *extra: [
        "export", factory, "--batch", str(b),
        "--seq", str(SEQ), "-o", out, *export_flags, *extra]
    r = run_main(dc_torch.__main__.main,
                 step(BATCH, path("step.mlir"), "--weights",
                      path("init.safetensors")), path("export.log"))
    if r.returncode:
        return [f"{family}: export FAILED: {last_line(r.stderr)}"]
    for ranks in (1, 2):
        r = run_main(torch_step.main, [
            "reference", factory, "--batch", str(BATCH), "--seq", str(SEQ),
            "--ranks", str(ranks), *reference_flags,
            "--tokens", path("tokens.bin"),
            "-o", path(f"ref{ranks}.safetensors")])
        if r.returncode:
            return [f"{family}: PyTorch reference FAILED: {r.stderr.strip()[-300:]}"]
    r = run_main(dc_torch.__main__.main, step(BATCH // 2, path("step2.mlir")))
    if r.returncode:
        return [f"{family}: export (2 ranks) FAILED: {r.stderr.strip()[-300:]}"]
    runs = []
    # The default target's schedule, its compute on the host backend.
    for ranks, mlir, flags in ((1, "step.mlir", ["--no-schedule"]),
                               (2, "step2.mlir", ["--world-size=2"])):
        what = f"{family}, {ranks} rank{'s' * (ranks > 1)}"
        compiled = compiles.submit(
            run, [shutil.which("dc-compile"), path(mlir), *flags,
                  "--lowering=host", "-o", path(f"w{ranks}.so")],
            path(f"compile{ranks}.log"))
        runs.append((what, ranks, compiled))
    return work, runs


def finish(work, runs):
    """Waits for each compile, runs the artifact and compares (one dc-run
    at a time: they are MPI jobs)."""
    path = lambda name: os.path.join(work, name)
    lines = []
    for what, ranks, compiled in runs:
        so, grads, log = (path(f"w{ranks}.so"), path(f"grads{ranks}.safetensors"),
                          path(f"run{ranks}.log"))
        r = compiled.result()
        if r.returncode:
            lines.append(f"{what}: dc-compile FAILED: {r.stderr.strip()[-400:]}")
            continue
        r = run([shutil.which("dc-run"), "--nproc", str(ranks), so,
                 "--init", path("init.safetensors"), "--data", path("tokens.bin"),
                 "--save-grads", grads], log)
        if r.returncode:
            lines.append(f"{what}: dc-run FAILED: {(r.stdout + r.stderr).strip()[-400:]}")
            continue
        r = run_main(torch_step.main, [
            "compare", path(f"ref{ranks}.safetensors"), grads, log])
        verdict = last_line(r.stdout) or r.stderr
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
    with concurrent.futures.ThreadPoolExecutor(COMPILE_JOBS) as compiles:
        # Every family's exports and references first (the compiles start
        # as they are queued), then the runs in order.
        prepared = [(family, prepare(family, args, compiles))
                    for family in args.families]
        for family, prep in prepared:
            for line in prep if isinstance(prep, list) else finish(*prep):
                print(line, flush=True)
                failed += "FAILED" in line
    print(f"{len(args.families)} families: "
          f"{'all match PyTorch' if not failed else f'{failed} runs FAILED'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
