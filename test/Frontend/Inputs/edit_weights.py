"""Writes a damaged copy of a safetensors file, for dc-run --init's errors:
a tensor dropped, transposed, or one the model does not have added."""

import argparse

import torch

from dc_torch.safetensors import read_safetensors, write_safetensors

ap = argparse.ArgumentParser()
ap.add_argument("input")
ap.add_argument("--drop")
ap.add_argument("--transpose")
ap.add_argument("--add")
ap.add_argument("-o", dest="output", required=True)
args = ap.parse_args()
tensors = read_safetensors(args.input)
if args.drop:
    del tensors[args.drop]
if args.transpose:
    tensors[args.transpose] = tensors[args.transpose].t().contiguous()
if args.add:
    tensors[args.add] = torch.zeros(3)
write_safetensors(args.output, tensors)
