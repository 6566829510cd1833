#!/usr/bin/env python3
"""Starts a command as torchrun would, on this machine, without torchrun.

  torchrun_like.py --nproc N [--only R,...] [--port P] -- COMMAND...
Runs COMMAND once per rank with RANK, LOCAL_RANK, WORLD_SIZE,
LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT (a free port unless
--port) and TORCHELASTIC_RUN_ID set, and nothing that names a transport:
libdcrt must find the TCP rendezvous on its own. --only starts just those
ranks (the others never come). Prints rank 0's stdout, then every rank's
stderr, and exits with the first non-zero status (0 if none).
"""
import argparse
import os
import socket
import subprocess
import sys


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--nproc", type=int, required=True)
    parser.add_argument("--only", default="")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    ranks = ([int(r) for r in args.only.split(",")] if args.only
             else list(range(args.nproc)))
    port = args.port or free_port()
    processes = []
    for rank in ranks:
        env = dict(os.environ)
        for name in ("DCRT_TRANSPORT", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                     "PMI_RANK", "PMIX_RANK"):
            env.pop(name, None)
        env.update({
            "RANK": str(rank), "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(args.nproc),
            "LOCAL_WORLD_SIZE": str(args.nproc),
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
            "TORCHELASTIC_RUN_ID": "dc-test",
        })
        processes.append(subprocess.Popen(command, env=env,
                                          stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE))
    status = 0
    outputs = []
    for process in processes:
        out, err = process.communicate()
        outputs.append((out, err))
        if process.returncode != 0 and status == 0:
            status = process.returncode if process.returncode > 0 else 1
    for rank, (out, _) in zip(ranks, outputs):
        if rank == 0:
            sys.stdout.write(out.decode(errors="replace"))
    for out, err in outputs:
        sys.stdout.write(err.decode(errors="replace"))
    sys.exit(status)


if __name__ == "__main__":
    main()
