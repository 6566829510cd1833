#!/usr/bin/env python3
"""Kills a dc-run launcher with SIGKILL in the middle of its job and reports
whether the job's other processes (mpirun, the ranks) end too.

  launcher_death.py --step N --within S -- dc-run --nproc 2 ... --steps 100000

The job's output goes to a file (a pipe would end the ranks by SIGPIPE once
its reader is gone, which would hide an orphaned job). When the output shows
step N, every process descending from dc-run is recorded, dc-run is killed
with SIGKILL, and each recorded process is waited for up to S seconds. What
is still running then is named, killed and the exit status is 1.
"""
import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time

from processes import alive, descendants


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--step", type=int, default=3)
    ap.add_argument("--within", type=float, default=10.0)
    ap.add_argument("--start-timeout", type=float, default=120.0)
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    with tempfile.NamedTemporaryFile("w+", suffix=".log") as log:
        job = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        marker = "step=%d " % args.step
        deadline = time.time() + args.start_timeout
        while True:
            log.seek(0)
            if marker in log.read():
                break
            if job.poll() is not None or time.time() > deadline:
                log.seek(0)
                sys.stdout.write(log.read())
                print("launcher_death: the job did not reach step %d" % args.step)
                job.kill()
                return 1
            time.sleep(0.1)
        job_processes = descendants(job.pid)
        job.kill()
        job.wait()
        print("launcher_death: killed dc-run (SIGKILL) at step %d; %d other "
              "processes in its job" % (args.step, len(job_processes)))
        deadline = time.time() + args.within
        left = job_processes
        while left and time.time() < deadline:
            time.sleep(0.1)
            left = [pid for pid in left if alive(pid)]
        if left:
            names = []
            for pid in left:
                try:
                    names.append("%d (%s)" % (pid, open("/proc/%d/comm" % pid).read().strip()))
                except OSError:
                    names.append(str(pid))
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            print("launcher_death: still running %g s later: %s"
                  % (args.within, ", ".join(names)))
            return 1
        print("launcher_death: every process of the job ended within %g s"
              % args.within)
        return 0


if __name__ == "__main__":
    sys.exit(main())
