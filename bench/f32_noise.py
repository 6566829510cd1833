"""How far PyTorch's own f32 training run is from itself: a plain-PyTorch
family (test/Frontend/Inputs/families.py) at the model suite's sizes
(hidden 256, 2 layers, vocabulary 1024, batch 2 x 128) with transformers'
initialization (N(0, 0.02) weights, zero biases, the padding row zero),
trained 20 AdamW steps on the suite's data order in f32, in f64, and in
f32 from weights scaled by (1 + 1e-7); prints the worst relative loss
differences. Where these reach the suite's f32 bound (1e-4), no f32
implementation can be held to it: bench/hf_frontend.py export records both
for every family, and compare takes twice the larger as the bound.

  python3 bench/f32_noise.py FAMILY TOKENS [--tied]
      TOKENS: an export's tokens.bin; --tied: the LM head tied to the
      embedding (transformers' OPT, GPT-2, Gemma)
"""

import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "test", "Frontend", "Inputs"))

import families  # noqa: E402
import hf_frontend  # noqa: E402

families.SIZES["suite"] = dict(dim=256, heads=4, kv_heads=2, ffn=512,
                               vocab=1024, window=32)


def make(name, tied):
    torch.manual_seed(0)
    model = families.make(name, "suite", seq=hf_frontend.SEQ)
    if tied:
        model.lm_head.weight = model.embed_tokens.weight
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (torch.nn.Linear, torch.nn.Embedding)) \
                    and not (tied and module is model.lm_head):
                module.weight.normal_(0.0, 0.02)
            if isinstance(module, torch.nn.Linear) and module.bias is not None:
                module.bias.zero_()
            if isinstance(module, torch.nn.Embedding) and \
                    module.padding_idx is not None:
                module.weight[module.padding_idx].zero_()
    return model


def main():
    name, tokens, tied = sys.argv[1], sys.argv[2], "--tied" in sys.argv[3:]
    count = os.path.getsize(tokens) // 4
    stream = torch.from_file(tokens, dtype=torch.int32, size=count)
    train = hf_frontend.train_losses
    f32 = train(make(name, tied), stream, 20, "cpu", False)
    f64 = train(make(name, tied), stream, 20, "cpu", False, f64=True)
    nudged = train(make(name, tied), stream, 20, "cpu", False, nudge=1e-7)
    worst = lambda xs: max(abs(a - b) / abs(b) for a, b in zip(xs, f32))
    print(f"{name}: PyTorch f32 {f32[0]:.5f} -> {f32[-1]:.5f}; worst relative "
          f"difference over 20 steps: f64 {worst(f64):.1e}, f32 from weights "
          f"x (1 + 1e-7) {worst(nudged):.1e}")


if __name__ == "__main__":
    main()
