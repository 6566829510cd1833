#!/usr/bin/env python3
"""Runs a command that must fail, and fail in bounded time.

  expect_failure.py --within SECONDS -- COMMAND...
Prints the command's output (stdout and stderr together) and exits 0 only
if the command exited non-zero before SECONDS passed: a hang is a failure,
not a pass.
"""
import argparse
import os
import signal
import subprocess
import sys
import time


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--within", type=float, required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    start = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT,
                               start_new_session=True)
    try:
        output, _ = process.communicate(timeout=args.within)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        sys.stdout.write(output.decode(errors="replace"))
        print("expect_failure: still running after %g s" % args.within)
        sys.exit(1)
    sys.stdout.write(output.decode(errors="replace"))
    if process.returncode == 0:
        print("expect_failure: the command succeeded")
        sys.exit(1)
    print("expect_failure: exit status %d after %.1f s" %
          (process.returncode, time.monotonic() - start))


if __name__ == "__main__":
    main()
