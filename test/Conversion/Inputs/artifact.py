#!/usr/bin/env python3
"""Prints what a dc artifact (a shared library) says about itself.

  artifact.py manifest LIBDCRT ARTIFACT
      prints dc_artifact_abi_version() and dc_artifact_manifest() (the
      manifest without its steps, then per step its name, entry and FLOPs
      and one argument or result per line)

LIBDCRT (the runtime, libdcrt.so) is loaded first with RTLD_GLOBAL so the
artifact's undefined dcrt_* symbols resolve; nothing of it runs. Training
an artifact is dc-run's job (test/Conversion/e2e).
"""

import argparse
import ctypes
import json
import os
import sys


def load(runtime, path):
    ctypes.CDLL(os.path.abspath(runtime), mode=ctypes.RTLD_GLOBAL)
    lib = ctypes.CDLL(os.path.abspath(path))
    lib.dc_artifact_manifest.restype = ctypes.c_char_p
    return lib


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=["manifest"])
    ap.add_argument("runtime")
    ap.add_argument("artifact")
    opts = ap.parse_args(argv)
    lib = load(opts.runtime, opts.artifact)
    print("abi", lib.dc_artifact_abi_version())
    text = lib.dc_artifact_manifest().decode()
    manifest = json.loads(text)
    steps = manifest.pop("steps")
    # The seal (dcrt.h) is the last member; manifest-sealed.test checks
    # what dc-run does with it.
    checksum = manifest.pop("checksum")
    if not text.endswith(',"checksum":"%s"}' % checksum) or len(checksum) != 16:
        print("the manifest does not end with its checksum")
        return 1
    print(json.dumps(manifest))
    for step in steps:
        print("step", step["name"], "entry", step["entry"],
              "flops", step.get("flops"))
        for kind in ("args", "results"):
            for entry in step[kind]:
                print(kind[:-1], json.dumps(entry))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
