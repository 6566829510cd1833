#!/usr/bin/env python3
"""An independent float64 model of dc-run training tiny_linear.c.

Re-derives everything dc-run and the artifact compute from their documented
definitions (counter-based init and data, softmax cross-entropy, averaged
gradients, torch-style AdamW) and prints the losses in dc-run's format, so
a test can compare them with what dc-run prints.
"""
import argparse
import math

MASK = (1 << 64) - 1
IN, CLASSES, GLOBAL_BATCH = 4, 3, 6
DATA_DOMAIN = 0x64617461  # "data"


def mix(x):
    """SplitMix64's finalizer (runtime/lib/Random.cpp)."""
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def hash_key(a, b, c):
    return mix(mix(mix(a) ^ b) ^ c)


def uniform(key):
    return ((key >> 11) + 1) * 2.0**-53


def normal(a, b, c):
    key = hash_key(a, b, c)
    return math.sqrt(-2.0 * math.log(uniform(key))) * math.cos(
        2.0 * math.pi * uniform(mix(key)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--init-std", type=float, default=0.02)
    args = parser.parse_args()
    beta1, beta2, eps = 0.9, 0.999, 1e-8

    # fc.weight (id 0) ~ N(0, std); fc.bias starts at 0.
    params = [[args.init_std * normal(args.seed, 0, i)
               for i in range(IN * CLASSES)], [0.0] * CLASSES]
    moments = [([0.0] * len(p), [0.0] * len(p)) for p in params]
    for step in range(1, args.steps + 1):
        step_key = hash_key(args.seed, DATA_DOMAIN, step)
        # Argument 2 is x (float), argument 3 the labels in [0, 3).
        x = [[normal(step_key, 2, r * IN + k) for k in range(IN)]
             for r in range(GLOBAL_BATCH)]
        labels = [min(int(uniform(hash_key(step_key, 3, r)) * CLASSES),
                      CLASSES - 1) for r in range(GLOBAL_BATCH)]
        w, b = params
        loss, grad_w, grad_b = 0.0, [0.0] * (IN * CLASSES), [0.0] * CLASSES
        for r in range(GLOBAL_BATCH):
            logits = [b[c] + sum(x[r][k] * w[k * CLASSES + c]
                                 for k in range(IN)) for c in range(CLASSES)]
            top = max(logits)
            total = sum(math.exp(v - top) for v in logits)
            loss += math.log(total) + top - logits[labels[r]]
            for c in range(CLASSES):
                d = (math.exp(logits[c] - top) / total -
                     (labels[r] == c)) / GLOBAL_BATCH
                grad_b[c] += d
                for k in range(IN):
                    grad_w[k * CLASSES + c] += x[r][k] * d
        print("step=%d loss=%.9g" % (step, loss / GLOBAL_BATCH))
        for p, g, (m, v) in zip(params, [grad_w, grad_b], moments):
            for i in range(len(p)):
                m[i] = beta1 * m[i] + (1 - beta1) * g[i]
                v[i] = beta2 * v[i] + (1 - beta2) * g[i] * g[i]
                denominator = (math.sqrt(v[i]) /
                               math.sqrt(1 - beta2**step) + eps)
                p[i] -= args.lr / (1 - beta1**step) * m[i] / denominator


if __name__ == "__main__":
    main()
