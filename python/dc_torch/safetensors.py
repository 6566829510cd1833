"""A safetensors writer (header JSON + raw little-endian bytes), so that no
package beyond torch is needed; dc-run --init reads the file."""

import json
import struct

import torch

_NAMES = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16",
          torch.int64: "I64", torch.int32: "I32"}


def _bytes(t):
    t = t.detach().contiguous().cpu()
    if t.dtype in (torch.bfloat16, torch.float16):
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def write_safetensors(path, tensors):
    """tensors: name -> tensor, written in that order."""
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        if t.dtype not in _NAMES:
            raise ValueError(f"tensor '{name}' has dtype {t.dtype}")
        data = _bytes(t)
        header[name] = {"dtype": _NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for data in blobs:
            f.write(data)


def read_safetensors(path):
    """name -> tensor (for tests)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    types = {v: k for k, v in _NAMES.items()}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        begin, end = e["data_offsets"]
        dtype = types[e["dtype"]]
        raw = bytearray(data[begin:end])
        store = torch.int16 if dtype in (torch.bfloat16, torch.float16) \
            else dtype
        t = torch.frombuffer(raw, dtype=store) if raw else torch.empty(
            0, dtype=store)
        out[name] = t.view(dtype).reshape(e["shape"]).clone()
    return out
