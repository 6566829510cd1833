#!/usr/bin/env python3
"""Prints examples/mlp_step.mlir (read from stdin) for a batch of B rows
instead of 8: the data shapes and the 1/N, 2/N factors of the mean-squared
loss (N = 4 B) change, nothing else. dc-run shards the data of a global
batch over the ranks, so the steps for batch 24 on 1 rank, 12 on 2 and 8 on
3 train on the same data."""
import re
import sys

rows = int(sys.argv[1])
text = sys.stdin.read()
assert "tensor<8x" in text and "0.0625" in text and "0.03125" in text
text = re.sub(r"tensor<8x", f"tensor<{rows}x", text)
text = text.replace("0.0625 : f32", f"{2.0 / (4 * rows)!r} : f32")
text = text.replace("0.03125 : f32", f"{1.0 / (4 * rows)!r} : f32")
sys.stdout.write(text)
