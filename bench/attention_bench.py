#!/usr/bin/env python3
"""PyTorch's fused attention on the shapes runtime/test/attention-check.cu
times for dc (configs A and B of dc-gen-llama, and A with 32 heads): bf16
torch.nn.functional.scaled_dot_product_attention restricted to the flash
backend, causal and not, forward and forward + backward, timed with
torch.cuda.Event (median of 3 rounds of 10 after a warm-up). TFLOP/s count
4 B H S^2 D for the forward and 10 B H S^2 D for the backward (halved when
causal), as attention-check does, so the lines compare side by side.

    python3 bench/attention_bench.py
"""
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

SHAPES = [("A", 4, 16, 2048, 128), ("B", 1, 32, 1024, 128),
          ("A-32h", 4, 32, 2048, 128)]


def time_ms(fn, reps=10):
    fn()
    torch.cuda.synchronize()
    begin = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(3):
        begin.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        times.append(begin.elapsed_time(end) / reps)
    return sorted(times)[1]


def main():
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    for name, batch, heads, seq, dim in SHAPES:
        for causal in (True, False):
            shape = (batch, heads, seq, dim)
            q, k, v = (torch.rand(shape, device="cuda", dtype=torch.bfloat16)
                       .mul_(2).sub_(1).requires_grad_() for _ in range(3))
            grad = torch.rand(shape, device="cuda", dtype=torch.bfloat16)
            with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                def forward():
                    with torch.no_grad():
                        F.scaled_dot_product_attention(q, k, v,
                                                       is_causal=causal)

                def forward_backward():
                    out = F.scaled_dot_product_attention(q, k, v,
                                                         is_causal=causal)
                    out.backward(grad)

                fwd = time_ms(forward)
                both = time_ms(forward_backward)
            work = batch * heads * seq * seq * dim * (0.5 if causal else 1)
            bwd = both - fwd
            print(f"bench torch {name:<8} B*H {batch * heads:4d} S {seq:5d} "
                  f"D {dim:4d} {'causal' if causal else 'full':<6} "
                  f"fwd {fwd:8.3f} ms {4 * work / fwd * 1e-9:6.1f} TFLOP/s  "
                  f"bwd {bwd:8.3f} ms {10 * work / bwd * 1e-9:6.1f} TFLOP/s  "
                  f"fwd+bwd {both:8.3f} ms {14 * work / both * 1e-9:6.1f} "
                  f"TFLOP/s", flush=True)


if __name__ == "__main__":
    main()
