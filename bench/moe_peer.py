#!/usr/bin/env python3
"""PyTorch peer for the one-GPU mixture-of-experts step: Hugging Face
MixtralForCausalLM with dc-gen-llama's `mixtral-1gpu` sizes (8 layers,
d 2048, expert ffn 5632, 8 experts top-2, 16/8 heads, vocab 32000, two
sequences of 2048: ../shared/BENCHMARKS.md's anchor), bf16 parameters,
fused AdamW (its states in bf16, as the parameters), trained by PyTorch
eager and by torch.compile of the whole model.

Measurement, per mode: a fresh model from seed 0, --warmup steps (default
3; compilation happens there), then --steps timed steps (default 10), each
between two torch.cuda.synchronize() calls: median and mean step time,
tokens/s of the median, peak device memory of the timed steps
(max_memory_allocated after reset_peak_memory_stats). One JSON line per
mode, starting with '{"bench": "moe_peer"', with transformers' MoE
implementation named (its `experts_implementation`, where the version has
one).

  python3 bench/moe_peer.py [--modes eager compile] [--steps 10]"""

import argparse
import json
import statistics
import time

import torch

SIZES = dict(vocab_size=32000, hidden_size=2048, intermediate_size=5632,
             num_hidden_layers=8, num_attention_heads=16,
             num_key_value_heads=8, num_local_experts=8,
             num_experts_per_tok=2, max_position_embeddings=4096,
             tie_word_embeddings=False)
BATCH, SEQ = 2, 2048


def run(mode, warmup, steps):
    import transformers as tf
    torch.manual_seed(0)
    config = tf.MixtralConfig(**SIZES)
    model = tf.MixtralForCausalLM(config).to("cuda", torch.bfloat16)
    model.train()
    parameters = sum(p.numel() for p in model.parameters())
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    forward = torch.compile(model) if mode == "compile" else model
    generator = torch.Generator(device="cuda").manual_seed(0)
    tokens = torch.randint(0, SIZES["vocab_size"], (BATCH, SEQ), device="cuda",
                           generator=generator)

    # The optimizer's share of the step, timed on the GPU: dc-run's step
    # time holds its AdamW too, and the two AdamWs move the same bytes.
    before_update = torch.cuda.Event(enable_timing=True)
    after_update = torch.cuda.Event(enable_timing=True)

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = forward(input_ids=tokens, labels=tokens).loss
        loss.backward()
        before_update.record()
        optimizer.step()
        after_update.record()
        return loss

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    times, losses, updates = [], [], []
    for _ in range(steps):
        torch.cuda.synchronize()
        start = time.perf_counter()
        loss = step()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
        losses.append(loss.item())
        updates.append(before_update.elapsed_time(after_update))
    median = statistics.median(times)
    result = {
        "bench": "moe_peer", "mode": mode, "parameters": parameters,
        "batch": BATCH, "seq": SEQ, "median_ms": round(median, 2),
        "mean_ms": round(statistics.mean(times), 2),
        "optimizer_median_ms": round(statistics.median(updates), 2),
        "tokens_per_s": round(BATCH * SEQ / median * 1e3),
        "peak_GiB": round(torch.cuda.max_memory_allocated() / 2**30, 2),
        "losses": [round(x, 4) for x in losses],
        "experts_implementation": getattr(
            config, "experts_implementation",
            getattr(config, "_experts_implementation", None)),
        "attn_implementation": getattr(config, "_attn_implementation", None),
        "torch": torch.__version__, "transformers": tf.__version__,
        "device": torch.cuda.get_device_name(),
    }
    del model, optimizer, forward
    torch.cuda.empty_cache()
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--modes", nargs="+", default=["eager", "compile"],
                    choices=["eager", "compile"])
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    args = ap.parse_args()
    for mode in args.modes:
        print(json.dumps(run(mode, args.warmup, args.steps)), flush=True)


if __name__ == "__main__":
    main()
