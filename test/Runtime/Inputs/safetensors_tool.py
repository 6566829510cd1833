#!/usr/bin/env python3
"""Reads and rewrites safetensors files for the checkpoint tests.

  show FILE                 metadata and tensors, one per line
  same A B                  exit 1 unless A and B hold equal tensors
  drop IN OUT NAME          OUT is IN without tensor NAME
  reshape IN OUT NAME DIMS  OUT is IN with NAME's shape set to DIMS (a,b,..)
  header IN OUT TEXT        OUT has IN's length field and data, TEXT as header
  flip IN OUT NAME          OUT is IN with the last byte of tensor NAME flipped

"show" prints the metadata without the per-tensor checksums
("fnv1a64:<tensor>"), then how many checksums match the data (computed here
independently of dc-run).
"""
import json
import struct
import sys


def fnv1a64(data):
    checksum = 0xcbf29ce484222325
    for byte in data:
        checksum = ((checksum ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % checksum


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
            "%s=%s" % item for item in sorted(metadata.items())
            if not item[0].startswith("fnv1a64:")))
        for name, (dtype, shape, data) in tensors.items():
            print("%s %s %s %d bytes" % (name, dtype, shape, len(data)))
        matching = sum(metadata.get("fnv1a64:" + name) == fnv1a64(data)
                       for name, (_, _, data) in tensors.items())
        print("checksums: %d of %d tensors match" % (matching, len(tensors)))
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
    elif command == "flip":
        metadata, tensors = read(args[0])
        dtype, shape, data = tensors[args[2]]
        tensors[args[2]] = (dtype, shape, data[:-1] + bytes([data[-1] ^ 1]))
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
