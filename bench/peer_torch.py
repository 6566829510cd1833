#!/usr/bin/env python3
"""PyTorch peer for dc's reference workloads: one Llama-style training step.

The model is the one `dc-gen-llama` generates (docs/models.md): token
embedding, per layer RMSNorm, fused QKV projection, causal attention
(F.scaled_dot_product_attention, is_causal=True), output projection, RMSNorm,
SwiGLU MLP with separate gate and up weights; final RMSNorm, untied LM head,
cross-entropy. No biases, no position encoding. By default weights and
activations are bf16, the loss is computed in fp32 and the optimizer is AdamW
(fused) on the bf16 parameters; --mixed-precision keeps fp32 parameters and
optimizer state and computes in bf16 (PyTorch's recommended recipe).

Modes:
  replicated  every rank holds all parameters and runs its own step: no
              communication at all, the compute floor a perfect ZeRO-3
              schedule would reach
  fsdp2       torch.distributed.fsdp.fully_shard on every block and on the root
Options:
  --compile             torch.compile of the whole model (after fully_shard)
  --compile-blocks      torch.compile of each block alone (before fully_shard,
                        as torchtitan does); excludes --compile
  --mixed-precision     fp32 parameters and AdamW state; fsdp2: every
                        fully_shard gets MixedPrecisionPolicy(param_dtype=bf16,
                        reduce_dtype=--reduce-dtype {fp32,bf16}); replicated:
                        forward and loss under torch.autocast(bf16)
  --no-reshard-after-forward   (fsdp2) blocks keep their gathered parameters
                        from forward to backward; the root keeps the default
  --prefetch N          (fsdp2) block i prefetches blocks i+1..i+N in forward
                        and i-1..i-N in backward (default 0: FSDP2's implicit
                        prefetch)
  --offload-activations forward and loss under
                        torch.autograd.graph.save_on_cpu(pin_memory=True),
                        PyTorch's own activation offload
Same start as dc-run:
  --save-init FILE      rank 0 writes the initial weights as safetensors in
                        dc's names and layout ([in, out] matrices), which
                        `dc-run --load FILE` reads
  --data FILE           int32 tokens; every step (warm-ups included) each rank
                        reads the rows dc-run --data FILE reads
  --write-tokens FILE --n N [--vocab V] [--seed S]
                        write N seeded random tokens in [0, V) and exit (no
                        GPU, no torch.distributed)

Measurement: --warmup steps (default 3), then --steps timed steps (default 10),
each between two torch.cuda.synchronize() calls; median and mean step time;
peak device memory of the timed steps (torch.cuda.max_memory_allocated after
reset_peak_memory_stats). Every step's loss, averaged over the ranks as dc-run
reports it, goes to the JSON's "losses" (reduced once after the last step, so
timing is unchanged). Rank 0 prints one readable line and one JSON line
(starting with '{"bench": "peer_torch"') on stdout; --json-out also writes it
to a file.

Usage:
  torchrun --standalone --nproc-per-node N bench/peer_torch.py --config A --mode fsdp2
  python3 bench/peer_torch.py --config tiny --mode replicated     (one GPU, no torchrun)
  python3 bench/peer_torch.py --write-tokens tokens.bin --n 1000000 --vocab 32000 --seed 1
"""
import argparse
import array
import contextlib
import ctypes
import datetime
import json
import os
import platform
import random
import socket
import statistics
import sys
import time
import traceback

# NVLink multicast (NVLS) stays off unless the caller asked for it; NCCL reads
# this when the communicator is created, so it must be set before init.
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")

PROG = "peer_torch.py"

# Sizes of the reference workloads (../shared/BENCHMARKS.md, dc-gen-llama's
# presets); batch and seq are per GPU. `tiny` is a smoke test, not a workload.
CONFIGS = {
    "tiny": dict(dim=256, ffn=704, heads=4, layers=2, vocab=32000, batch=2, seq=256),
    "A": dict(dim=2048, ffn=5632, heads=16, layers=16, vocab=32000, batch=4, seq=2048),
    "B": dict(dim=4096, ffn=11008, heads=32, layers=8, vocab=32000, batch=1, seq=1024),
}
SIZE_KEYS = ("dim", "ffn", "heads", "layers", "vocab", "batch", "seq")
RMS_EPS = 1e-5  # dc-gen-llama's RMSNorm epsilon


class PeerError(Exception):
    """An error with a message meant for the user (no traceback)."""


def log(rank, *parts):
    if rank == 0:
        print(*parts, flush=True)


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog=PROG,
        description="PyTorch peer for dc's reference training steps (run under torchrun).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("Usage:")[1] if "Usage:" in __doc__ else None)
    p.add_argument("--config", choices=sorted(CONFIGS), default="A",
                   help="workload sizes (default A)")
    p.add_argument("--mode", choices=("replicated", "fsdp2"), default="fsdp2",
                   help="replicated (no communication) or fsdp2 (default)")
    p.add_argument("--compile", action="store_true",
                   help="torch.compile the model (after fully_shard in fsdp2 mode)")
    p.add_argument("--compile-blocks", action="store_true",
                   help="torch.compile each block alone (before fully_shard, as torchtitan "
                        "does); excludes --compile")
    p.add_argument("--mixed-precision", action="store_true",
                   help="fp32 parameters and optimizer state, bf16 compute (fsdp2: "
                        "MixedPrecisionPolicy; replicated: torch.autocast)")
    p.add_argument("--reduce-dtype", choices=("fp32", "bf16"), default=None,
                   help="fsdp2 with --mixed-precision: dtype of the gradient "
                        "reduce-scatter (default fp32)")
    p.add_argument("--no-reshard-after-forward", dest="reshard_after_forward",
                   action="store_false",
                   help="fsdp2: blocks keep their gathered parameters until backward")
    p.add_argument("--prefetch", type=int, default=0, metavar="N",
                   help="fsdp2: explicit prefetch of the next N blocks in forward and the "
                        "previous N in backward (default 0: FSDP2's implicit prefetch)")
    p.add_argument("--offload-activations", action="store_true",
                   help="run forward and loss under save_on_cpu(pin_memory=True)")
    p.add_argument("--save-init", metavar="FILE",
                   help="rank 0 writes the initial weights to FILE (safetensors, dc's "
                        "names and layout) before the first step")
    p.add_argument("--data", metavar="FILE",
                   help="int32 token file: each step reads the rows dc-run --data reads "
                        "(default: one seeded batch per rank, reused every step)")
    p.add_argument("--write-tokens", metavar="FILE",
                   help="write --n seeded random tokens in [0, vocab) to FILE and exit")
    p.add_argument("--n", type=int, default=None,
                   help="with --write-tokens: how many tokens")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first (default 3)")
    p.add_argument("--steps", type=int, default=10, help="timed steps (default 10)")
    p.add_argument("--seed", type=int, default=0, help="seed of weights and data (default 0)")
    p.add_argument("--init-std", type=float, default=0.02,
                   help="std of the normal weight init; norms start at 1 (default 0.02)")
    p.add_argument("--lr", type=float, default=1e-3, help="AdamW learning rate (default 1e-3)")
    p.add_argument("--weight-decay", type=float, default=0.0,
                   help="AdamW weight decay (default 0)")
    p.add_argument("--optimizer-impl", choices=("fused", "foreach"), default="fused",
                   help="torch.optim.AdamW implementation (default fused)")
    p.add_argument("--world", type=int, default=0,
                   help="expected world size; a different one is an error")
    p.add_argument("--json-out", metavar="FILE", help="rank 0 also writes the JSON result here")
    for key in SIZE_KEYS:
        p.add_argument(f"--{key}", type=int, default=None,
                       help=f"override the config's {key}")
    args = p.parse_args(argv)
    if args.write_tokens is not None:
        if args.n is None or args.n < 1:
            p.error("--write-tokens needs --n N (N >= 1)")
        vocab = args.vocab if args.vocab is not None else CONFIGS[args.config]["vocab"]
        if vocab < 1:
            p.error("--vocab must be positive")
        args.token_vocab = vocab
        return args
    if args.n is not None:
        p.error("--n goes with --write-tokens")
    if args.compile and args.compile_blocks:
        p.error("--compile (the whole model) and --compile-blocks (each block) exclude "
                "each other")
    if args.mode != "fsdp2":
        for flag, given in (("--no-reshard-after-forward", not args.reshard_after_forward),
                            ("--prefetch", args.prefetch != 0)):
            if given:
                p.error(f"{flag} is an FSDP2 option (--mode fsdp2)")
    if args.prefetch < 0:
        p.error("--prefetch must be >= 0")
    if args.reduce_dtype is not None and not (args.mode == "fsdp2" and args.mixed_precision):
        p.error("--reduce-dtype goes with --mode fsdp2 --mixed-precision")
    if args.reduce_dtype is None and args.mode == "fsdp2":
        # Without --mixed-precision FSDP2 reduces in the parameters' dtype.
        args.reduce_dtype = "fp32" if args.mixed_precision else "bf16"
    if args.warmup < 0 or args.steps < 1:
        p.error("--warmup must be >= 0 and --steps >= 1")
    sizes = dict(CONFIGS[args.config])
    for key in SIZE_KEYS:
        value = getattr(args, key)
        if value is not None:
            if value < 1:
                p.error(f"--{key} must be positive")
            sizes[key] = value
    if sizes["dim"] % sizes["heads"]:
        p.error(f"dim {sizes['dim']} is not a multiple of heads {sizes['heads']}")
    args.sizes = sizes
    return args


def launcher_env():
    """Rank, local rank and world size from torchrun; one process without it."""
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1")
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        if "MASTER_PORT" not in os.environ:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                os.environ["MASTER_PORT"] = str(s.getsockname()[1])
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    world = int(os.environ["WORLD_SIZE"])
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    return rank, local_rank, world, local_world


def param_count(s):
    """dc-gen-llama's count: 2 V D + L (4 D^2 + 3 D F + 2 D) + D."""
    d, f = s["dim"], s["ffn"]
    return 2 * s["vocab"] * d + s["layers"] * (4 * d * d + 3 * d * f + 2 * d) + d


def step_flops(s):
    """6 x params x tokens plus attention (12 L B S^2 D, causality not discounted),
    the convention of docs/cost-model.md's calibration."""
    tokens = s["batch"] * s["seq"]
    attention = 12 * s["layers"] * s["batch"] * s["seq"] ** 2 * s["dim"]
    return 6 * param_count(s) * tokens + attention


# ---------------------------------------------------------------------------
# Pure helpers (no torch): dc's checkpoint names and layout, the safetensors
# format, dc-run's token rows. bench/test_peer_helpers.py tests them.

SAFETENSORS_DTYPE_BYTES = {"F32": 4, "BF16": 2, "F16": 2, "I32": 4, "I64": 8}

# The peer's module path inside a block -> dc's parameter name inside a layer,
# and whether the torch weight is transposed for dc (nn.Linear.weight is
# [out, in]; dc computes x @ W with W [in, out]).
_BLOCK_PARAMS = {
    "attn_norm.weight": ("attn_norm", False),
    "wqkv.weight": ("attn.wqkv", True),
    "wo.weight": ("attn.wo", True),
    "mlp_norm.weight": ("mlp_norm", False),
    "w_gate.weight": ("mlp.w_gate", True),
    "w_up.weight": ("mlp.w_up", True),
    "w_down.weight": ("mlp.w_down", True),
}
_ROOT_PARAMS = {
    "tok_embeddings.weight": ("tok_embeddings", False),  # [V, D] in both
    "norm.weight": ("norm", False),
    "lm_head.weight": ("lm_head", True),
}


def dc_param_name(torch_name):
    """The peer's parameter name -> (dc's name, transpose for dc?).

    Wrappers' path components (torch.compile's `_orig_mod`, activation
    checkpointing's `_checkpoint_wrapped_module`) are ignored. wqkv's rows
    are [Q; K; V], each head h at rows [h Dh, (h+1) Dh) (the peer splits its
    output with view(b, s, 3, heads, Dh)); transposed they are the columns
    dc-gen-llama slices: [0, D) Q, [D, 2D) K, [2D, 3D) V, head-major."""
    parts = [p for p in torch_name.split(".")
             if p not in ("_orig_mod", "_checkpoint_wrapped_module", "_fsdp_wrapped_module")]
    name = ".".join(parts)
    if name in _ROOT_PARAMS:
        return _ROOT_PARAMS[name]
    if len(parts) >= 3 and parts[0] == "layers" and parts[1].isdigit():
        inner = ".".join(parts[2:])
        if inner in _BLOCK_PARAMS:
            dc_name, transpose = _BLOCK_PARAMS[inner]
            return f"layers.{int(parts[1])}.{dc_name}", transpose
    raise PeerError(f"parameter '{torch_name}' has no dc name")


def write_safetensors(path, tensors, metadata=None):
    """Writes a safetensors file: an 8-byte little-endian header length N, N
    bytes of JSON ({"__metadata__": {str: str}, name: {"dtype", "shape",
    "data_offsets": [begin, end]}}) padded with spaces to a multiple of 8,
    then the tensors' bytes back to back (offsets from the end of the header).

    `tensors`: (name, dtype, shape, data) in file order; dtype a safetensors
    name ("F32", "BF16", ...); data the raw little-endian bytes (any
    bytes-like object) or a function returning them, called once, when that
    tensor is written (so a big model need not be in host memory at once).
    Written to PATH.tmp, then renamed: no half-written file under PATH."""
    header = {}
    if metadata:
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise PeerError("safetensors metadata keys and values must be strings")
        header["__metadata__"] = dict(metadata)
    sizes = []
    offset = 0
    for name, dtype, shape, _ in tensors:
        if name == "__metadata__" or name in header:
            raise PeerError(f"safetensors: duplicate or reserved tensor name '{name}'")
        if dtype not in SAFETENSORS_DTYPE_BYTES:
            raise PeerError(f"safetensors: unknown dtype '{dtype}' of '{name}'")
        numel = 1
        for d in shape:
            if not isinstance(d, int) or d < 0:
                raise PeerError(f"safetensors: bad shape {list(shape)} of '{name}'")
            numel *= d
        nbytes = numel * SAFETENSORS_DTYPE_BYTES[dtype]
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + nbytes]}
        sizes.append(nbytes)
        offset += nbytes
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for (name, _, _, data), nbytes in zip(tensors, sizes):
            if callable(data):
                data = data()
            got = memoryview(data).nbytes
            if got != nbytes:
                raise PeerError(f"safetensors: '{name}' has {got} bytes, its shape and "
                                f"dtype need {nbytes}")
            f.write(data)
    os.replace(tmp, path)


def token_row_starts(step, rank, world, batch, seq, n_tokens):
    """dc-run's rule (tools/dc-run/lib/Data.cpp): on step `step` (from 1,
    warm-ups included) row j of rank r is global row g = r B + j of G = W B
    and starts at ((step - 1) G + g) S mod (n - S - 1)."""
    windows = n_tokens - seq - 1
    if windows < 1:
        raise PeerError(f"a token file of {n_tokens} tokens is too short for rows of "
                        f"{seq} (needs at least {seq + 2})")
    if step < 1 or not 0 <= rank < world:
        raise PeerError(f"bad step {step} or rank {rank} of {world}")
    rows = world * batch
    return [(((step - 1) * rows + rank * batch + j) * seq) % windows for j in range(batch)]


def token_rows(tokens, step, rank, world, batch, seq):
    """(inputs, targets) of rank `rank` on step `step`: `batch` rows of `seq`
    tokens each, targets shifted by one; slices of `tokens` (a list gives
    lists, an array.array arrays, a 1-D torch tensor tensors)."""
    starts = token_row_starts(step, rank, world, batch, seq, len(tokens))
    return ([tokens[a:a + seq] for a in starts],
            [tokens[a + 1:a + 1 + seq] for a in starts])


def read_token_file(path):
    """An int32 little-endian token file as array.array('i')."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) % 4:
        raise PeerError(f"token file '{path}' is not a whole number of int32 tokens "
                        f"({len(data)} bytes)")
    tokens = array.array("i")
    if tokens.itemsize != 4:
        raise PeerError("this Python's array 'i' is not 4 bytes")
    tokens.frombytes(data)
    if sys.byteorder != "little":
        tokens.byteswap()
    if not tokens:
        raise PeerError(f"token file '{path}' is empty")
    return tokens


def write_token_file(path, n, vocab, seed):
    """N tokens uniform in [0, vocab) from random.Random(seed), int32 little
    endian: the same file for the same (n, vocab, seed) everywhere."""
    if n < 1 or vocab < 1 or vocab > 2**31:
        raise PeerError(f"need n >= 1 and 1 <= vocab <= 2^31 (got n {n}, vocab {vocab})")
    rng = random.Random(seed)
    tokens = array.array("i", (rng.randrange(vocab) for _ in range(n)))
    if sys.byteorder != "little":
        tokens.byteswap()
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        tokens.tofile(f)
    os.replace(tmp, path)


# ---------------------------------------------------------------------------


def build_model(torch, sizes, device, param_dtype=None):
    """The model with parameters of `param_dtype` (default bf16; fp32 for
    --mixed-precision), uninitialized on `device`."""
    nn = torch.nn
    F = torch.nn.functional
    dtype = torch.bfloat16 if param_dtype is None else param_dtype

    def linear(n_in, n_out):
        return nn.Linear(n_in, n_out, bias=False, dtype=dtype)

    def rms_norm(d):
        return nn.RMSNorm(d, eps=RMS_EPS, dtype=dtype)

    class Block(nn.Module):
        def __init__(self, d, f, heads):
            super().__init__()
            self.heads = heads
            self.attn_norm = rms_norm(d)
            self.wqkv = linear(d, 3 * d)
            self.wo = linear(d, d)
            self.mlp_norm = rms_norm(d)
            self.w_gate = linear(d, f)
            self.w_up = linear(d, f)
            self.w_down = linear(f, d)

        def forward(self, h):
            b, s, d = h.shape
            qkv = self.wqkv(self.attn_norm(h))
            # [B, S, 3, H, Dh] -> 3 x [B, H, S, Dh]
            q, k, v = qkv.view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
            attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            h = h + self.wo(attn.transpose(1, 2).reshape(b, s, d))
            u = self.mlp_norm(h)
            return h + self.w_down(F.silu(self.w_gate(u)) * self.w_up(u))

    class Decoder(nn.Module):
        def __init__(self, s):
            super().__init__()
            self.tok_embeddings = nn.Embedding(s["vocab"], s["dim"], dtype=dtype)
            self.layers = nn.ModuleList(
                Block(s["dim"], s["ffn"], s["heads"]) for _ in range(s["layers"]))
            self.norm = rms_norm(s["dim"])
            self.lm_head = linear(s["dim"], s["vocab"])

        def forward(self, tokens, targets):
            h = self.tok_embeddings(tokens)
            for layer in self.layers:
                h = layer(h)
            logits = self.lm_head(self.norm(h))
            return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())

    # Built without storage, then materialized once on the device: no CPU
    # init pass over billions of elements and no default init to overwrite.
    with torch.device("meta"):
        model = Decoder(sizes)
    return model.to_empty(device=device)


def init_parameters(torch, model, seed, std, device):
    """Deterministic: the same seed gives the same weights on every rank and
    every world size (the full model is built before any sharding)."""
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 1:  # RMSNorm weights
                p.fill_(1.0)
            else:
                p.normal_(0.0, std, generator=gen)


def make_batch(torch, sizes, seed, rank, device):
    """Next-token data: each rank its own rows, seeded by (seed, rank)."""
    gen = torch.Generator(device=device)
    gen.manual_seed(seed * 1_000_003 + 7919 * (rank + 1))
    seq = torch.randint(0, sizes["vocab"], (sizes["batch"], sizes["seq"] + 1),
                        device=device, generator=gen)
    return seq[:, :-1].contiguous(), seq[:, 1:].contiguous()


def save_dc_checkpoint(torch, model, path, metadata=None):
    """The model's full (unsharded) weights as safetensors in dc's names and
    layout, each in its parameter's dtype (bf16 as BF16, fp32 as F32)."""
    if sys.byteorder != "little":
        raise PeerError("--save-init writes little-endian bytes; this host is big-endian")
    dtypes = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16"}
    entries = []
    for torch_name, param in model.named_parameters():
        name, transpose = dc_param_name(torch_name)
        if param.dtype not in dtypes:
            raise PeerError(f"parameter '{torch_name}' is {param.dtype}, not f32/bf16/f16")
        shape = list(param.shape[::-1] if transpose else param.shape)
        if transpose and param.ndim != 2:
            raise PeerError(f"parameter '{torch_name}' is not a matrix")

        def data(param=param, transpose=transpose):
            t = param.detach()
            t = (t.t() if transpose else t).contiguous().cpu()
            # The raw bytes of a contiguous host tensor (no numpy needed).
            return ctypes.string_at(t.data_ptr(), t.numel() * t.element_size())
        entries.append((name, dtypes[param.dtype], shape, data))
    write_safetensors(path, entries, metadata)


def load_tokens(torch, path, vocab, seq):
    """The token file as a host int64 tensor, checked against the model."""
    tokens = read_token_file(path)
    if len(tokens) < seq + 2:
        raise PeerError(f"token file '{path}' has {len(tokens)} tokens; rows of {seq} "
                        f"need at least {seq + 2}")
    stream = torch.frombuffer(tokens, dtype=torch.int32).to(torch.int64)
    low, high = int(stream.min()), int(stream.max())
    if low < 0 or high >= vocab:
        raise PeerError(f"token file '{path}' has tokens in [{low}, {high}], outside "
                        f"the vocabulary [0, {vocab})")
    return stream


def step_batch(torch, tokens, step, rank, world, sizes, device):
    """This rank's (inputs, targets) of step `step` (from 1) as dc-run reads
    them, gathered on the host and copied to the device."""
    starts = token_row_starts(step, rank, world, sizes["batch"], sizes["seq"], len(tokens))
    index = torch.tensor(starts, dtype=torch.int64)[:, None] + torch.arange(sizes["seq"])
    return tokens[index].to(device), tokens[index + 1].to(device)


def import_mixed_precision_policy():
    try:
        from torch.distributed.fsdp import MixedPrecisionPolicy  # PyTorch >= 2.6
    except ImportError:
        try:
            from torch.distributed._composable.fsdp import MixedPrecisionPolicy  # 2.4, 2.5
        except ImportError as e:
            raise PeerError(f"this PyTorch has no FSDP2 MixedPrecisionPolicy ({e}); "
                            "need PyTorch >= 2.4")
    return MixedPrecisionPolicy


def set_explicit_prefetch(blocks, n):
    """Block i prefetches blocks i+1..i+n in forward and i-1..i-n (nearest
    first) in backward: FSDPModule.set_modules_to_{forward,backward}_prefetch."""
    for i, block in enumerate(blocks):
        for method in ("set_modules_to_forward_prefetch", "set_modules_to_backward_prefetch"):
            if not hasattr(block, method):
                raise PeerError(f"this PyTorch's FSDPModule has no {method} (--prefetch "
                                "needs PyTorch >= 2.6)")
        forward = blocks[i + 1:i + 1 + n]
        backward = blocks[max(0, i - n):i][::-1]
        if forward:
            block.set_modules_to_forward_prefetch(forward)
        if backward:
            block.set_modules_to_backward_prefetch(backward)


def import_fully_shard():
    try:
        from torch.distributed.fsdp import fully_shard  # PyTorch >= 2.6
    except ImportError:
        try:
            from torch.distributed._composable.fsdp import fully_shard  # 2.4, 2.5
        except ImportError as e:
            raise PeerError(f"this PyTorch has no FSDP2 fully_shard ({e}); need PyTorch >= 2.4")
    return fully_shard


class OffloadContext:
    """save_on_cpu(pin_memory=True), counting the bytes it packs (eager only:
    a compiled model's hooks may be traced, where a Python counter is wrong)."""

    def __init__(self, torch, count):
        self.ctx = torch.autograd.graph.save_on_cpu(pin_memory=True)
        self.bytes = 0
        pack = getattr(self.ctx, "pack_hook", None)
        if count and pack is not None:
            def counting_pack(tensor):
                self.bytes += tensor.numel() * tensor.element_size()
                return pack(tensor)
            self.ctx.pack_hook = counting_pack
        self.counting = count and pack is not None

    def __enter__(self):
        self.bytes = 0
        return self.ctx.__enter__()

    def __exit__(self, *exc):
        return self.ctx.__exit__(*exc)


def nccl_version(torch):
    try:
        v = torch.cuda.nccl.version()
    except Exception:  # no NCCL in this build
        return None
    if isinstance(v, int):  # old encoding: major*1000 + minor*100 + patch (or *10000 from 2.9)
        major = v // 10000 if v >= 10000 else v // 1000
        minor = (v % 10000) // 100 if v >= 10000 else (v % 1000) // 100
        return f"{major}.{minor}.{v % 100}"
    return ".".join(str(x) for x in v)


def run(args, torch, rank, local_rank, world, local_world, result):
    import torch.distributed as dist

    if not torch.cuda.is_available():
        raise PeerError("no CUDA GPU is visible to PyTorch (torch.cuda.is_available() is False; "
                        f"torch {torch.__version__}, built for CUDA {torch.version.cuda})")
    ngpu = torch.cuda.device_count()
    if local_world > ngpu or local_rank >= ngpu:
        raise PeerError(f"{local_world} processes were started on this node but only {ngpu} "
                        f"GPU(s) are visible; use --nproc-per-node {ngpu} or fewer")
    if args.world and args.world != world:
        raise PeerError(f"world size is {world} but --world {args.world} was asked for")

    device = torch.device("cuda", local_rank)
    torch.cuda.set_device(device)
    dist.init_process_group(backend="nccl", device_id=device)
    result.update(gpu=torch.cuda.get_device_name(device), nccl=nccl_version(torch))

    sizes = args.sizes
    torch.manual_seed(args.seed)
    param_dtype = torch.float32 if args.mixed_precision else torch.bfloat16
    model = build_model(torch, sizes, device, param_dtype)
    init_parameters(torch, model, args.seed, args.init_std, device)
    n_params = sum(p.numel() for p in model.parameters())
    assert n_params == param_count(sizes), (n_params, param_count(sizes))
    if args.save_init:
        # The full model, before any sharding and before the first step.
        if rank == 0:
            save_dc_checkpoint(torch, model, args.save_init, {
                "source": PROG, "config": args.config, "seed": str(args.seed),
                "init_std": repr(args.init_std),
                "sizes": json.dumps(sizes, separators=(",", ":"))})
            log(rank, f"{PROG}: wrote the initial weights to {args.save_init}")
        dist.barrier()
    if args.data:
        token_stream = load_tokens(torch, args.data, sizes["vocab"], sizes["seq"])
        tokens = targets = None  # read per step
    else:
        token_stream = None
        tokens, targets = make_batch(torch, sizes, args.seed, rank, device)

    if args.compile_blocks:
        # torchtitan's per-block compile: each block wrapped alone before
        # fully_shard; FSDP2's hooks then sit on the wrapper and run eagerly.
        for i, block in enumerate(model.layers):
            model.layers[i] = torch.compile(block)
    if args.mode == "fsdp2":
        from torch.distributed.device_mesh import init_device_mesh
        fully_shard = import_fully_shard()
        mesh = init_device_mesh("cuda", (world,))
        shard_options = {}
        if args.mixed_precision:
            MixedPrecisionPolicy = import_mixed_precision_policy()
            reduce_dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[args.reduce_dtype]
            shard_options["mp_policy"] = MixedPrecisionPolicy(
                param_dtype=torch.bfloat16, reduce_dtype=reduce_dtype)
        for layer in model.layers:
            fully_shard(layer, mesh=mesh, reshard_after_forward=args.reshard_after_forward,
                        **shard_options)
        fully_shard(model, mesh=mesh, **shard_options)
        if args.prefetch:
            set_explicit_prefetch(list(model.layers), args.prefetch)
    if args.compile:
        model = torch.compile(model)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=args.lr, weight_decay=args.weight_decay,
        fused=args.optimizer_impl == "fused", foreach=args.optimizer_impl == "foreach" or None)
    compiled = args.compile or args.compile_blocks
    offload = OffloadContext(torch, count=not compiled) if args.offload_activations else None

    autocast = args.mixed_precision and args.mode == "replicated"

    def train_step(tokens, targets):
        with contextlib.ExitStack() as stack:
            if offload is not None:
                stack.enter_context(offload)
            if autocast:  # fp32 parameters, bf16 compute; backward outside
                stack.enter_context(torch.autocast("cuda", dtype=torch.bfloat16))
            loss = model(tokens, targets)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    torch.cuda.synchronize()
    dist.barrier()
    log(rank, f"{PROG}: config {args.config} {sizes}, {n_params / 1e6:.1f} M parameters, "
              f"mode {args.mode}{' compiled' if args.compile else ''}"
              f"{' compiled-blocks' if args.compile_blocks else ''}"
              f"{' mixed-precision' if args.mixed_precision else ''}"
              f"{' offload' if args.offload_activations else ''}, world {world}, "
              f"{args.warmup} warm-up + {args.steps} timed steps")

    losses, times_ms = [], []
    torch.cuda.reset_peak_memory_stats(device)
    for i in range(args.warmup + args.steps):
        if i == args.warmup:  # the peak of the timed (steady-state) steps
            result["peak_warmup_GiB"] = round(torch.cuda.max_memory_allocated(device) / 2**30, 3)
            torch.cuda.reset_peak_memory_stats(device)
        if token_stream is not None:  # dc-run's rows of step i + 1, before the clock
            tokens, targets = step_batch(torch, token_stream, i + 1, rank, world, sizes, device)
        torch.cuda.synchronize()
        start = time.perf_counter()
        losses.append(train_step(tokens, targets))
        torch.cuda.synchronize()
        elapsed = (time.perf_counter() - start) * 1e3
        if i >= args.warmup:
            times_ms.append(elapsed)
        else:
            log(rank, f"{PROG}: warm-up step {i + 1}: {elapsed:.1f} ms")
    peak_gib = torch.cuda.max_memory_allocated(device) / 2**30
    peak_reserved_gib = torch.cuda.max_memory_reserved(device) / 2**30
    # Every step's loss averaged over the ranks (dc-run's report), in one
    # all-reduce after the last step: nothing between the timed steps changes.
    mean_losses = torch.stack([x.float() for x in losses])
    dist.all_reduce(mean_losses)
    mean_losses = [float(x) / world for x in mean_losses.cpu()]
    losses = [float(x) for x in losses]

    median = statistics.median(times_ms)
    mine = dict(rank=rank, median_ms=round(median, 3), peak_GiB=round(peak_gib, 3))
    everyone = [None] * world
    dist.all_gather_object(everyone, mine)

    flops = step_flops(sizes)
    result.update(
        ok=True,
        params=n_params,
        step_ms_median=round(median, 3),
        step_ms_mean=round(statistics.mean(times_ms), 3),
        step_ms_min=round(min(times_ms), 3),
        step_ms_max=round(max(times_ms), 3),
        step_ms=[round(t, 3) for t in times_ms],
        peak_GiB=round(peak_gib, 3),
        peak_reserved_GiB=round(peak_reserved_gib, 3),
        tokens_per_s_per_gpu=round(sizes["batch"] * sizes["seq"] / (median / 1e3), 1),
        model_tflop_per_step=round(flops / 1e12, 3),
        tflops_per_gpu=round(flops / (median / 1e3) / 1e12, 1),
        loss_first=round(losses[0], 6),
        loss_last=round(losses[-1], 6),
        losses=[round(x, 6) for x in mean_losses],
        ranks=everyone,
        max_rank_step_ms_median=max(r["median_ms"] for r in everyone),
        max_rank_peak_GiB=max(r["peak_GiB"] for r in everyone),
    )
    if offload is not None and offload.counting:
        result["offloaded_GiB_per_step"] = round(offload.bytes / 2**30, 3)
    if not all(map(lambda x: x == x and abs(x) != float("inf"), losses + mean_losses)):
        result["warning"] = "loss is not finite"
    dist.barrier()


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.write_tokens is not None:  # no torch, no GPU
        try:
            write_token_file(args.write_tokens, args.n, args.token_vocab, args.seed)
        except (PeerError, OSError) as e:
            print(f"{PROG}: error: {e}", file=sys.stderr)
            return 1
        print(f"{PROG}: wrote {args.n} tokens in [0, {args.token_vocab}) (seed {args.seed}) "
              f"to {args.write_tokens}", flush=True)
        return 0
    rank, local_rank, world, local_world = launcher_env()
    result = {
        "bench": "peer_torch",
        "ok": False,
        "config": args.config,
        "sizes": args.sizes,
        "mode": args.mode,
        "compile": args.compile,
        "compile_blocks": args.compile_blocks,
        "mixed_precision": args.mixed_precision,
        "reduce_dtype": args.reduce_dtype,
        "reshard_after_forward": args.reshard_after_forward if args.mode == "fsdp2" else None,
        "prefetch": args.prefetch,
        "offload": args.offload_activations,
        "data": args.data,
        "save_init": args.save_init,
        "param_count": param_count(args.sizes),
        "step_flops": step_flops(args.sizes),
        "world": world,
        "warmup": args.warmup,
        "steps": args.steps,
        "seed": args.seed,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "python": platform.python_version(),
        "nccl_nvls_enable": os.environ.get("NCCL_NVLS_ENABLE"),
    }
    try:
        import torch
    except ImportError as e:
        print(f"{PROG}: error: PyTorch is not installed for {sys.executable} ({e})",
              file=sys.stderr)
        return 2
    result.update(torch=torch.__version__, cuda=torch.version.cuda)

    status = 0
    try:
        run(args, torch, rank, local_rank, world, local_world, result)
    except PeerError as e:
        result["error"] = str(e)
        status = 1
    except torch.cuda.OutOfMemoryError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else "out of memory"
        result["error"] = f"out of device memory: {first}"
        status = 1
    except Exception as e:  # report and exit non-zero; the traceback goes to stderr
        traceback.print_exc()
        result["error"] = f"{type(e).__name__}: {str(e).strip()[:500]}"
        if (args.compile or args.compile_blocks) and args.offload_activations:
            result["error"] += (" [known: with PyTorch 2.11, save_on_cpu returns contiguous copies of "
                                "non-contiguous saved tensors and torch.compile's backward asserts "
                                "their strides; run --offload-activations eager]")
        status = 1
    finally:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            try:
                dist.destroy_process_group()
            except Exception:
                pass

    if status:
        print(f"{PROG}: error (rank {rank}): {result['error']}", file=sys.stderr, flush=True)
    if rank == 0:
        if result["ok"]:
            r = result
            print(f"{PROG}: config {r['config']} {r['mode']}"
                  f"{' compile' if r['compile'] else ''}"
                  f"{' compile-blocks' if r['compile_blocks'] else ''}"
                  f"{' eager' if not (r['compile'] or r['compile_blocks']) else ''}"
                  f"{' mixed-precision' if r['mixed_precision'] else ''}"
                  f"{' offload' if r['offload'] else ''} world {r['world']}: "
                  f"step median {r['step_ms_median']:.2f} ms, mean {r['step_ms_mean']:.2f} ms "
                  f"(min {r['step_ms_min']:.2f}, max {r['step_ms_max']:.2f}; slowest rank "
                  f"{r['max_rank_step_ms_median']:.2f}), peak {r['peak_GiB']:.2f} GiB, "
                  f"{r['tflops_per_gpu']} TFLOP/s per GPU, loss {r['loss_first']:.4f} -> "
                  f"{r['loss_last']:.4f}; {r['gpu']}, torch {r['torch']}, nccl {r['nccl']}",
                  flush=True)
        line = json.dumps(result)
        print(line, flush=True)
        if args.json_out:
            with open(args.json_out, "w") as f:
                f.write(line + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
