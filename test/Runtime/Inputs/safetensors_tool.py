#!/usr/bin/env python3
"""Reads and rewrites safetensors files for the checkpoint tests.

  show FILE                 metadata and tensors, one per line
  same A B                  exit 1 unless A and B hold equal tensors
  drop IN OUT NAME          OUT is IN without tensor NAME
  reshape IN OUT NAME DIMS  OUT is IN with NAME's shape set to DIMS (a,b,..)
  header IN OUT TEXT        OUT has IN's length field and data, TEXT as header
"""
import json
import struct
import sys


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    body = data[8 + length:]
    metadata = header.pop("__metadata__", {})
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        tensors[name] = (entry["dtype"], entry["shape"], body[begin:end])
    return metadata, tensors


def write(path, metadata, tensors):
    header, body = {"__metadata__": metadata}, b""
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(body), len(body) + len(data)]}
        body += data
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + body)


def main():
    command, args = sys.argv[1], sys.argv[2:]
    if command == "show":
        metadata, tensors = read(args[0])
        print("metadata " + " ".join(
            "%s=%s" % item for item in sorted(metadata.items())))
        for name, (dtype, shape, data) in tensors.items():
            print("%s %s %s %d bytes" % (name, dtype, shape, len(data)))
    elif command == "same":
        _, first = read(args[0])
        _, second = read(args[1])
        if first != second:
            differing = sorted(name for name in set(first) | set(second)
                               if first.get(name) != second.get(name))
            sys.exit("tensors differ: %s" % ", ".join(differing))
        print("same %d tensors" % len(first))
    elif command == "drop":
        metadata, tensors = read(args[0])
        del tensors[args[2]]
        write(args[1], metadata, tensors)
    elif command == "reshape":
        metadata, tensors = read(args[0])
        dtype, _, data = tensors[args[2]]
        tensors[args[2]] = (dtype, [int(d) for d in args[3].split(",")], data)
        write(args[1], metadata, tensors)
    elif command == "header":
        with open(args[0], "rb") as f:
            data = f.read()
        (length,) = struct.unpack("<Q", data[:8])
        text = args[2].encode().ljust(length)
        with open(args[1], "wb") as f:
            f.write(data[:8] + text[:length] + data[8 + length:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
