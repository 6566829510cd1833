#!/usr/bin/env python3
"""PyTorch peer for dc's reference workloads: one Llama-style training step.

The model is the one `dc-gen-llama` generates (docs/models.md): token
embedding, per layer RMSNorm, fused QKV projection, causal attention
(F.scaled_dot_product_attention, is_causal=True), output projection, RMSNorm,
SwiGLU MLP with separate gate and up weights; final RMSNorm, untied LM head,
cross-entropy. No biases, no position encoding. Weights and activations are
bf16; the loss is computed in fp32; the optimizer is AdamW (fused) on the bf16
parameters.

Modes:
  replicated  every rank holds all parameters and runs its own step: no
              communication at all, the compute floor a perfect ZeRO-3
              schedule would reach
  fsdp2       torch.distributed.fsdp.fully_shard on every block and on the root
Options: --compile (torch.compile of the model), --offload-activations
(forward and loss under torch.autograd.graph.save_on_cpu(pin_memory=True),
PyTorch's own activation offload).

Measurement: --warmup steps (default 3), then --steps timed steps (default 10),
each between two torch.cuda.synchronize() calls; median and mean step time;
peak device memory of the timed steps (torch.cuda.max_memory_allocated after
reset_peak_memory_stats). Rank 0 prints one readable line and one JSON line
(starting with '{"bench": "peer_torch"') on stdout; --json-out also writes it
to a file.

Usage:
  torchrun --standalone --nproc-per-node N bench/peer_torch.py --config A --mode fsdp2
  python3 bench/peer_torch.py --config tiny --mode replicated     (one GPU, no torchrun)
"""
import argparse
import contextlib
import datetime
import json
import os
import platform
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
    p.add_argument("--offload-activations", action="store_true",
                   help="run forward and loss under save_on_cpu(pin_memory=True)")
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


def build_model(torch, sizes, device):
    nn = torch.nn
    F = torch.nn.functional
    bf16 = torch.bfloat16

    def linear(n_in, n_out):
        return nn.Linear(n_in, n_out, bias=False, dtype=bf16)

    def rms_norm(d):
        return nn.RMSNorm(d, eps=RMS_EPS, dtype=bf16)

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
            self.tok_embeddings = nn.Embedding(s["vocab"], s["dim"], dtype=bf16)
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
    model = build_model(torch, sizes, device)
    init_parameters(torch, model, args.seed, args.init_std, device)
    n_params = sum(p.numel() for p in model.parameters())
    assert n_params == param_count(sizes), (n_params, param_count(sizes))
    tokens, targets = make_batch(torch, sizes, args.seed, rank, device)

    if args.mode == "fsdp2":
        from torch.distributed.device_mesh import init_device_mesh
        fully_shard = import_fully_shard()
        mesh = init_device_mesh("cuda", (world,))
        for layer in model.layers:
            fully_shard(layer, mesh=mesh, reshard_after_forward=True)
        fully_shard(model, mesh=mesh)
    if args.compile:
        model = torch.compile(model)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=args.lr, weight_decay=args.weight_decay,
        fused=args.optimizer_impl == "fused", foreach=args.optimizer_impl == "foreach" or None)
    offload = OffloadContext(torch, count=not args.compile) if args.offload_activations else None

    def train_step():
        with offload if offload is not None else contextlib.nullcontext():
            loss = model(tokens, targets)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    torch.cuda.synchronize()
    dist.barrier()
    log(rank, f"{PROG}: config {args.config} {sizes}, {n_params / 1e6:.1f} M parameters, "
              f"mode {args.mode}{' compiled' if args.compile else ''}"
              f"{' offload' if args.offload_activations else ''}, world {world}, "
              f"{args.warmup} warm-up + {args.steps} timed steps")

    losses, times_ms = [], []
    torch.cuda.reset_peak_memory_stats(device)
    for i in range(args.warmup + args.steps):
        if i == args.warmup:  # the peak of the timed (steady-state) steps
            result["peak_warmup_GiB"] = round(torch.cuda.max_memory_allocated(device) / 2**30, 3)
            torch.cuda.reset_peak_memory_stats(device)
        torch.cuda.synchronize()
        start = time.perf_counter()
        losses.append(train_step())
        torch.cuda.synchronize()
        elapsed = (time.perf_counter() - start) * 1e3
        if i >= args.warmup:
            times_ms.append(elapsed)
        else:
            log(rank, f"{PROG}: warm-up step {i + 1}: {elapsed:.1f} ms")
    peak_gib = torch.cuda.max_memory_allocated(device) / 2**30
    peak_reserved_gib = torch.cuda.max_memory_reserved(device) / 2**30
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
        ranks=everyone,
        max_rank_step_ms_median=max(r["median_ms"] for r in everyone),
        max_rank_peak_GiB=max(r["peak_GiB"] for r in everyone),
    )
    if offload is not None and offload.counting:
        result["offloaded_GiB_per_step"] = round(offload.bytes / 2**30, 3)
    if not all(map(lambda x: x == x and abs(x) != float("inf"), losses)):
        result["warning"] = "loss is not finite"
    dist.barrier()


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    rank, local_rank, world, local_world = launcher_env()
    result = {
        "bench": "peer_torch",
        "ok": False,
        "config": args.config,
        "sizes": args.sizes,
        "mode": args.mode,
        "compile": args.compile,
        "offload": args.offload_activations,
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
        if args.compile and args.offload_activations:
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
                  f"{' compile' if r['compile'] else ' eager'}"
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
