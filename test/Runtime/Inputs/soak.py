#!/usr/bin/env python3
"""Fault tolerance: a job killed at random points and resumed ends as the
uninterrupted one.

  soak.py --work DIR --steps N --every K --kills M [--seed S] -- dc-run ARGS...

Runs `dc-run ARGS --steps N --checkpoint-dir DIR/whole --save-every K` once,
uninterrupted. Then the same job into DIR/killed with --resume: each of M
times it is started and killed, every process of the job with SIGKILL at
once (as a crashed node ends it), at a random moment after one of its
checkpoints; then started once more and left to finish. Its last checkpoint must be
byte-identical to the uninterrupted run's: the same weights, optimizer
state and step. The job's output goes to files (a pipe would end it by
SIGPIPE once its reader stopped reading).
"""
import argparse
import filecmp
import os
import random
import re
import signal
import subprocess
import sys
import time

from processes import alive, descendants


def first_step_printed(log_path):
    with open(log_path) as log:
        found = re.search(r"^step=(\d+) ", log.read(), re.M)
    return int(found.group(1)) if found else 0


def resumed_where_expected(log_path, start):
    """True if the run's first step is the one after its latest
    checkpoint (a restart from step 1 would end the same, and hide a
    broken --resume)."""
    with open(log_path) as log:
        text = log.read()
    loaded = "(step %d)" % start in text and "loaded checkpoint" in text
    if first_step_printed(log_path) == 0:  # a job killed after its last step
        return loaded
    return first_step_printed(log_path) == start + 1 and (start == 0 or loaded)


def latest_checkpoint_step(directory):
    steps = [int(m.group(1)) for name in os.listdir(directory)
             if (m := re.fullmatch(r"step-(\d+)\.safetensors", name))]
    return max(steps, default=0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--every", type=int, required=True)
    ap.add_argument("--kills", type=int, required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    rng = random.Random(args.seed)
    whole, killed = (os.path.join(args.work, d) for d in ("whole", "killed"))
    os.makedirs(killed, exist_ok=True)

    def job(directory, resume):
        return command + ["--steps", str(args.steps), "--checkpoint-dir",
                          directory, "--save-every", str(args.every)] + \
            (["--resume"] if resume else [])

    with open(os.path.join(args.work, "whole.log"), "w") as log:
        if subprocess.run(job(whole, False), stdout=log, stderr=subprocess.STDOUT,
                          timeout=args.timeout).returncode != 0:
            print("soak: the uninterrupted run failed")
            return 1
    for kill in range(1, args.kills + 1):
        start = latest_checkpoint_step(killed)
        # The kill lands at a random point after a random checkpoint of this
        # run that is not its last: the job's output is buffered, its
        # checkpoints are not (each appears whole, by a rename).
        last_target = (args.steps - 1) // args.every * args.every
        if last_target <= start:
            print("soak: too few checkpoints left for kill %d" % kill)
            return 1
        # Spread over what is left, so that every kill finds one.
        left = (last_target - start) // args.every
        target = start + args.every * rng.randint(
            1, max(1, left // (args.kills - kill + 1)))
        log_path = os.path.join(args.work, "killed-%d.log" % kill)
        with open(log_path, "w") as log:
            process = subprocess.Popen(job(killed, True), stdout=log,
                                       stderr=subprocess.STDOUT)
            deadline = time.time() + args.timeout
            while latest_checkpoint_step(killed) < target:
                if process.poll() is not None or time.time() > deadline:
                    print("soak: run %d ended or stalled before step %d"
                          % (kill, target))
                    process.kill()
                    return 1
                time.sleep(0.001)
            time.sleep(rng.uniform(0, 0.02))
            # The whole job at once, as a crashed node would end it (dc-run
            # alone would take its job down too, a few steps later).
            job_processes = descendants(process.pid)
            for pid in job_processes:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            process.kill()
            if process.wait() == 0:
                print("soak: run %d finished before it was killed" % kill)
                return 1
            # The job ends with dc-run; the next start waits for all of it.
            deadline = time.time() + 10
            while any(alive(p) for p in job_processes):
                if time.time() > deadline:
                    print("soak: the killed job's processes still run")
                    return 1
                time.sleep(0.05)
        if not resumed_where_expected(log_path, start):
            print("soak: run %d did not start at step %d" % (kill, start + 1))
            return 1
        print("soak: run %d resumed at step %d, killed after its checkpoint "
              "of step %d (SIGKILL; latest checkpoint then: step %d)"
              % (kill, start + 1, target, latest_checkpoint_step(killed)))
    start = latest_checkpoint_step(killed)
    final_log = os.path.join(args.work, "final.log")
    with open(final_log, "w") as log:
        if subprocess.run(job(killed, True), stdout=log, stderr=subprocess.STDOUT,
                          timeout=args.timeout).returncode != 0:
            print("soak: the last resumed run failed")
            return 1
    if not resumed_where_expected(final_log, start):
        print("soak: the last run did not start at step %d" % (start + 1))
        return 1
    print("soak: the last run resumed at step %d and finished" % (start + 1))
    final = "step-%d.safetensors" % args.steps
    if not filecmp.cmp(os.path.join(whole, final), os.path.join(killed, final),
                       shallow=False):
        print("soak: %s differs from the uninterrupted run's" % final)
        return 1
    print("soak: %s is byte-identical to the uninterrupted run's" % final)
    return 0


if __name__ == "__main__":
    sys.exit(main())
