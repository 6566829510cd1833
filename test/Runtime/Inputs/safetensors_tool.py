#!/usr/bin/env python3
"""Reads and rewrites safetensors files for the checkpoint tests.

  show FILE                 metadata and tensors, one per line
  same A B                  exit 1 unless A and B hold equal tensors
  close A B RTOL            exit 1 unless A and B hold the same tensors (names,
                            shapes) whose largest difference is within RTOL
                            of A's largest magnitude, tensor by tensor
  drop IN OUT NAME          OUT is IN without tensor NAME
  reshape IN OUT NAME DIMS  OUT is IN with NAME's shape set to DIMS (a,b,..)
  header IN OUT TEXT        OUT has IN's length field and data, TEXT as header
  flip IN OUT NAME          OUT is IN with the last byte of tensor NAME flipped
  absmax FILE NAME          the largest magnitude in each slice NAME[i] of
                            dim 0, a line each
  zero IN OUT NAME...       OUT is IN with tensors NAME... all zeros (their
                            checksums recomputed: a valid file)
  set IN OUT NAME I VALUE   OUT is IN with element I of the F32 tensor NAME
                            set to VALUE (nan, inf, -1.5, ...; its checksum
                            recomputed)
  meta IN OUT KEY VALUE     OUT is IN with metadata KEY set to VALUE
  bf16 IN OUT NAME          OUT is IN with the F32 tensor NAME stored as BF16
                            (truncated; its checksum recomputed)

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


def values(dtype, data):
    """A tensor's elements as Python floats (F32 and BF16)."""
    if dtype == "F32":
        return struct.unpack("<%df" % (len(data) // 4), data)
    if dtype == "BF16":
        halves = struct.unpack("<%dH" % (len(data) // 2), data)
        return struct.unpack("<%df" % len(halves),
                             struct.pack("<%dI" % len(halves),
                                         *(h << 16 for h in halves)))
    sys.exit("close: no comparison of %s tensors" % dtype)


def close(first, second, rtol):
    """Each tensor's largest difference against its largest magnitude in
    `first` (a gradient's entries span many magnitudes: a relative test
    per element fails on those near zero); the tensors over `rtol`."""
    if sorted(first) != sorted(second):
        sys.exit("tensors differ in names: %s" % ", ".join(
            sorted(set(first) ^ set(second))))
    failed = []
    for name in sorted(first):
        (dtype, shape, data), (dtype2, shape2, data2) = first[name], second[name]
        if shape != shape2:
            failed.append("%s: shape %s against %s" % (name, shape, shape2))
            continue
        a, b = values(dtype, data), values(dtype2, data2)
        scale = max(abs(x) for x in a) if a else 0.0
        worst = max((abs(x - y) for x, y in zip(a, b)), default=0.0)
        relative = worst / scale if scale > 0 else worst
        if not relative <= rtol:
            failed.append("%s: %.3g of its largest magnitude %.3g" % (
                name, relative, scale))
        print("%s %s %.3g" % (name, "x".join(map(str, shape)), relative))
    return failed


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
    elif command == "close":
        _, first = read(args[0])
        _, second = read(args[1])
        failed = close(first, second, float(args[2]))
        if failed:
            sys.exit("tensors differ beyond %s:\n  %s" % (args[2], "\n  ".join(failed)))
        print("close: %d tensors within %s" % (len(first), args[2]))
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
    elif command == "absmax":
        _, tensors = read(args[0])
        dtype, shape, data = tensors[args[1]]
        elements = values(dtype, data)
        step = len(elements) // shape[0] if shape else len(elements)
        for i in range(shape[0] if shape else 1):
            print("%s[%d]: %.6g" % (args[1], i, max(
                abs(x) for x in elements[i * step:(i + 1) * step])))
    elif command == "zero":
        metadata, tensors = read(args[0])
        for name in args[2:]:
            dtype, shape, data = tensors[name]
            tensors[name] = (dtype, shape, bytes(len(data)))
            if "fnv1a64:" + name in metadata:
                metadata["fnv1a64:" + name] = fnv1a64(bytes(len(data)))
        write(args[1], metadata, tensors)
    elif command == "set":
        metadata, tensors = read(args[0])
        name, index = args[2], int(args[3])
        dtype, shape, data = tensors[name]
        assert dtype == "F32", "set: F32 tensors only"
        data = data[:4 * index] + struct.pack("<f", float(args[4])) + \
            data[4 * index + 4:]
        tensors[name] = (dtype, shape, data)
        if "fnv1a64:" + name in metadata:
            metadata["fnv1a64:" + name] = fnv1a64(data)
        write(args[1], metadata, tensors)
    elif command == "bf16":
        metadata, tensors = read(args[0])
        name = args[2]
        dtype, shape, data = tensors[name]
        assert dtype == "F32", "bf16: F32 tensors only"
        data = b"".join(data[i + 2:i + 4] for i in range(0, len(data), 4))
        tensors[name] = ("BF16", shape, data)
        if "fnv1a64:" + name in metadata:
            metadata["fnv1a64:" + name] = fnv1a64(data)
        write(args[1], metadata, tensors)
    elif command == "meta":
        metadata, tensors = read(args[0])
        metadata[args[2]] = args[3]
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
