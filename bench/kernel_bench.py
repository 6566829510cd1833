#!/usr/bin/env python3
"""The peer side of dc's per-kernel comparison on one GPU: the memory-bound
ops of a Llama step (RMSNorm, SwiGLU, residual add, softmax cross-entropy,
rotary embedding, forward and backward) at config A's shapes compiled by torch.compile
(Inductor), torch.matmul on the matrix products dc's step runs, and the
device's copy bandwidth. Writes JSON that bench/kernel_table.py sets beside
dc's measured per-op profile.

Each op computes what dc's generated step computes (bf16 tensors, fp32
arithmetic inside), and is timed as the GPU runs it: 20 calls captured in
one CUDA graph, replayed between two events (median of 5 replays), so the
Python launch cost of Inductor's wrapper is not counted, as it is not for
dc's per-op events. `bytes` is the op's least memory traffic (each input
read once, each output written once): the effective bandwidth of an op is
bytes / time, compared with the copy bandwidth (a device-to-device copy of
1 GiB, read + write, the faster of a memcpy and a copy kernel).

    python3 bench/kernel_bench.py --gemms GEMMS.json --out peer.json
"""
import argparse
import json

import torch

TOKENS, DIM, FFN, VOCAB = 8192, 2048, 5632, 32000
BATCH, SEQ, HEADS = 4, 2048, 16
EPS = 1e-5
BF16 = torch.bfloat16


def graph_time_ms(fn, args, calls=20, replays=5):
    """Median time of one call of fn(*args), from CUDA-graph replays."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn(*args)
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn(*args)
    graph.replay()
    torch.cuda.synchronize()
    begin = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(replays):
        begin.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(begin.elapsed_time(end) / calls)
    return sorted(times)[len(times) // 2]


def nbytes(*tensors):
    return sum(t.numel() * t.element_size() for t in tensors)


def rmsnorm_fwd(x, w):
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS)
    return (xf * rstd * w.float()).to(BF16), rstd


def rmsnorm_bwd(dy, x, w, rstd):
    xf, dyf, wf = x.float(), dy.float(), w.float()
    g = dyf * wf
    dot = (g * xf).sum(-1, keepdim=True) * rstd.pow(3) / x.shape[-1]
    dx = g * rstd - xf * dot
    dw = (dyf * xf * rstd).sum(0)
    return dx.to(BF16), dw


def rmsnorm_bwd_residual(dy, x, w, rstd, dres):
    """A layer's norm backward as a step computes it: the residual stream's
    gradient dres added into the input gradient."""
    dx, dw = rmsnorm_bwd(dy, x, w, rstd)
    return (dx.float() + dres.float()).to(BF16), dw


def swiglu_fwd(g, u):
    gf = g.float()
    return (gf * torch.sigmoid(gf) * u.float()).to(BF16)


def swiglu_bwd(dh, g, u):
    gf, uf, dhf = g.float(), u.float(), dh.float()
    s = torch.sigmoid(gf)
    silu = gf * s
    du = dhf * silu
    dg = dhf * uf * s * (1 + gf * (1 - s))
    return dg.to(BF16), du.to(BF16)


def residual_add(a, b):
    return (a.float() + b.float()).to(BF16)


def cross_entropy_fwd(logits, labels):
    lf = logits.float()
    lse = torch.logsumexp(lf, -1)
    picked = lf.gather(-1, labels[:, None])[:, 0]
    return (lse - picked).mean(), lse


def cross_entropy_bwd(logits, labels, lse):
    p = torch.exp(logits.float() - lse[:, None])
    p = p - torch.nn.functional.one_hot(labels, logits.shape[-1]).float()
    return (p / logits.shape[0]).to(BF16)


def rotary_fwd(x, cos, sin):
    """Llama's half-split rotation of x [B, S, H, Dh] by f32 tables
    [S, Dh/2] (dc-gen-llama --rotary): (x1 c - x2 s, x2 c + x1 s)."""
    x1, x2 = x.float().chunk(2, -1)
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], -1).to(BF16)


def rotary_bwd(dy, cos, sin):
    """The inverse rotation: the gradient of rotary_fwd."""
    d1, d2 = dy.float().chunk(2, -1)
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.cat([d1 * c + d2 * s, d2 * c - d1 * s], -1).to(BF16)


def memory_ops():
    """(name, function, inputs, least bytes) at config A's shapes."""
    r = lambda *s, dtype=BF16: torch.randn(*s, device="cuda").to(dtype)
    x, dy, w = r(TOKENS, DIM), r(TOKENS, DIM), r(DIM)
    dres = r(TOKENS, DIM)
    rstd = torch.rand(TOKENS, 1, device="cuda") + 0.5
    g, u, dh = r(TOKENS, FFN), r(TOKENS, FFN), r(TOKENS, FFN)
    logits = r(TOKENS, VOCAB)
    labels = torch.randint(0, VOCAB, (TOKENS,), device="cuda")
    lse = torch.logsumexp(logits.float(), -1)
    out_d, out_f = torch.empty_like(x), torch.empty_like(g)
    # One rotation: the queries (or keys) of A, and the angle tables.
    q = x.view(BATCH, SEQ, HEADS, DIM // HEADS)
    half = DIM // HEADS // 2
    angles = torch.arange(SEQ, device="cuda")[:, None].float() * \
        10000.0 ** (-torch.arange(half, device="cuda").float() / half)
    cos, sin = angles.cos(), angles.sin()
    return [
        ("rmsnorm forward", rmsnorm_fwd, (x, w),
         nbytes(x, w, out_d, rstd)),
        ("rmsnorm backward", rmsnorm_bwd, (dy, x, w, rstd),
         nbytes(dy, x, w, rstd, out_d) + DIM * 4),
        ("rmsnorm backward + residual", rmsnorm_bwd_residual,
         (dy, x, w, rstd, dres), nbytes(dy, x, w, rstd, dres, out_d) + DIM * 4),
        ("swiglu forward", swiglu_fwd, (g, u), nbytes(g, u, out_f)),
        ("swiglu backward", swiglu_bwd, (dh, g, u), nbytes(dh, g, u) * 5 // 3),
        ("residual add", residual_add, (x, dy), nbytes(x, dy, out_d)),
        ("cross-entropy forward", cross_entropy_fwd, (logits, labels),
         nbytes(logits, labels, lse)),
        ("cross-entropy backward", cross_entropy_bwd, (logits, labels, lse),
         nbytes(logits, labels, lse, logits)),
        ("rotary forward", rotary_fwd, (q, cos, sin), nbytes(q, cos, sin, q)),
        ("rotary backward", rotary_bwd, (q, cos, sin), nbytes(q, cos, sin, q)),
    ]


def copy_bandwidth():
    """Bytes read + written per second copying 1 GiB on the device, the
    faster of a memcpy (in a CUDA graph: a copy node) and an elementwise
    kernel (16-byte loads and stores, as dc's elementwise kernels)."""
    src = torch.empty(1 << 29, dtype=BF16, device="cuda")
    dst = torch.empty_like(src)
    memcpy = graph_time_ms(lambda: dst.copy_(src), (), calls=10)
    kernel = graph_time_ms(lambda: torch.mul(src, 1, out=dst), (), calls=10)
    return 2 * nbytes(src) / (min(memcpy, kernel) * 1e-3)


def copy_same_bytes_ms(least):
    """The time of a device copy that moves an op's least traffic (half read,
    half written), the faster of a memcpy and a copy kernel: what any kernel
    moving those bytes pays for its launch, ramp-up and tail, so the share of
    the 1 GiB copy bandwidth a small op can reach is measured, not assumed."""
    src = torch.empty(least // 4, dtype=BF16, device="cuda")
    dst = torch.empty_like(src)
    memcpy = graph_time_ms(lambda: dst.copy_(src), ())
    kernel = graph_time_ms(lambda: torch.mul(src, 1, out=dst), ())
    return min(memcpy, kernel)


def ncu_marks(repeat):
    """For bench/gpu_inductor_ncu.sh: each op compiled and warmed up (its
    autotuning done), then called `repeat` times inside the NVTX range
    "dc_measure" that Nsight Compute is told to profile, each call followed
    by a marker kernel (torch.cuda._sleep's spin_kernel), so the profiled
    kernels split into calls in this order. Nsight Compute then times
    Inductor's kernels as it times dc's (gpu_kernel_ncu.sh): kernel
    durations, no launch gaps, the same cache and clock control."""
    names = []
    for name, fn, inputs, least in memory_ops():
        compiled = torch.compile(fn, fullgraph=True)
        for _ in range(3):
            compiled(*inputs)
        torch.cuda.synchronize()
        for _ in range(repeat):
            torch.cuda.nvtx.range_push("dc_measure")
            compiled(*inputs)
            torch.cuda._sleep(1000)
            torch.cuda.nvtx.range_pop()
            torch.cuda.synchronize()
            names.append({"op": name, "bytes": least})
    print("ncu-marks " + json.dumps(names))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gemms", help="JSON list of matrix products "
                        "(bench/kernel_table.py --gemms)")
    parser.add_argument("--out")
    parser.add_argument("--ncu-marks", action="store_true",
                        help="call each op between markers for "
                        "Nsight Compute (bench/gpu_inductor_ncu.sh)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="with --ncu-marks: calls of each op")
    args = parser.parse_args()
    torch.manual_seed(0)
    if args.ncu_marks:
        ncu_marks(args.repeat)
        return
    if not args.out:
        parser.error("--out is required")
    result = {"torch": torch.__version__,
              "device": torch.cuda.get_device_name(),
              "copy_bytes_per_s": copy_bandwidth(), "ops": {}, "gemms": []}
    print(f"torch {result['torch']}, {result['device']}, copy "
          f"{result['copy_bytes_per_s'] / 1e12:.2f} TB/s")
    for name, fn, inputs, least in memory_ops():
        compiled = torch.compile(fn, fullgraph=True)
        eager_ms = graph_time_ms(fn, inputs)
        ms = graph_time_ms(compiled, inputs)
        copy_ms = copy_same_bytes_ms(least)
        result["ops"][name] = {"inductor_ms": ms, "eager_ms": eager_ms,
                               "bytes": least, "copy_same_bytes_ms": copy_ms}
        print(f"{name:24s} inductor {ms * 1e3:8.1f} us "
              f"({least / (ms * 1e-3) / 1e12:.2f} TB/s)  eager "
              f"{eager_ms * 1e3:8.1f} us  copy of the same bytes "
              f"{copy_ms * 1e3:6.1f} us "
              f"({least / (copy_ms * 1e-3) / result['copy_bytes_per_s']:.0%}"
              f" of the 1 GiB copy's bandwidth)")
    for gemm in json.load(open(args.gemms)) if args.gemms else []:
        m, n, k = gemm["m"], gemm["n"], gemm["k"]
        a = torch.randn(k, m, device="cuda").to(BF16).t() if gemm["ta"] \
            else torch.randn(m, k, device="cuda").to(BF16)
        b = torch.randn(n, k, device="cuda").to(BF16).t() if gemm["tb"] \
            else torch.randn(k, n, device="cuda").to(BF16)
        out = torch.empty(m, n, device="cuda", dtype=BF16)
        ms = graph_time_ms(lambda a, b: torch.matmul(a, b, out=out), (a, b))
        result["gemms"].append(dict(gemm, torch_ms=ms))
        print(f"matmul {m}x{n}x{k} ta={gemm['ta']} tb={gemm['tb']}: "
              f"{ms * 1e3:8.1f} us, {2 * m * n * k / (ms * 1e-3) / 1e12:.0f} "
              f"TFLOP/s")
    json.dump(result, open(args.out, "w"), indent=1)


if __name__ == "__main__":
    main()
