"""Hugging Face models through dc_torch, against PyTorch, from the same
weights and data (issue: the PyTorch frontend on torch 2.x).

  export OUT [--models llama gpt2] [--steps 20]
      (on a machine with torch 2.x and transformers; no downloads: the models
      are built from configs with random weights.) For each model: the
      training step exported by dc_torch in f32 for 1 rank (batch 2) and for
      2 ranks (batch 1 per rank, the same global batch), and in bf16 for 1
      rank; the initial weights (safetensors, what dc-run --init reads); a
      token file (what dc-run --data reads); PyTorch's losses over STEPS
      AdamW steps on dc-run's data order and hyper-parameters, in f32 on the
      CPU and in bf16 autocast on the GPU (the bf16 noise the bf16 step is
      judged against). OUT/export.json records times, ops and errors.
  coverage [--out DIR]
      exports small Mistral, Qwen2, Qwen3, Phi-3, Gemma and Gemma 2 models
      (f32) and prints what exported and what did not, with the error.
  compare OUT LOG... [--f32-tolerance T]
      each LOG is dc-run's output, named MODEL-DTYPE-*.log; its losses
      against PyTorch's f32 losses: worst relative difference, and for bf16
      the bound is 2x the worst difference PyTorch's own bf16 autocast run
      has from its f32 run (at least 1e-2). Prints one table; exit 1 if
      any run misses its bound."""

import argparse
import json
import math
import os
import re
import sys
import time
import traceback

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

BATCH, SEQ, VOCAB = 2, 128, 1024
LR, BETAS, EPS = 1e-3, (0.9, 0.999), 1e-8  # dc-run's AdamW defaults


def build(name, attention):
    """The model, built from a config with random weights (seeded)."""
    import transformers as tf
    torch.manual_seed(0)
    if name == "llama":
        cfg = tf.LlamaConfig(
            vocab_size=VOCAB, hidden_size=256, intermediate_size=512,
            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=SEQ, use_cache=False,
            tie_word_embeddings=False)
        cls = tf.LlamaForCausalLM
    elif name == "gpt2":
        cfg = tf.GPT2Config(
            vocab_size=VOCAB, n_positions=SEQ, n_embd=256, n_layer=2,
            n_head=4, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
            use_cache=False)
        cls = tf.GPT2LMHeadModel
    else:
        raise ValueError(name)
    cfg._attn_implementation = attention
    model = cls(cfg)
    model.eval()  # no dropout; nothing else in these models depends on it
    return model


def token_stream(steps, global_batch):
    g = torch.Generator().manual_seed(1234)
    return torch.randint(0, VOCAB, (steps * global_batch * SEQ + SEQ + 64,),
                         generator=g, dtype=torch.int32)


def batch_of(stream, step, global_batch):
    """dc-run's rows for `step` (from 1): row g reads the window starting at
    ((step - 1) G + g) S mod (len - S - 1); targets are shifted by one."""
    windows = len(stream) - SEQ - 1
    rows = []
    for g in range(global_batch):
        start = ((step - 1) * global_batch + g) * SEQ % windows
        rows.append(stream[start:start + SEQ + 1].long())
    rows = torch.stack(rows)
    return rows[:, :-1], rows[:, 1:]


def train_losses(model, stream, steps, device, bf16_autocast):
    from dc_torch.trace import default_loss
    model = model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, eps=EPS,
                            weight_decay=0.0)
    losses = []
    for step in range(1, steps + 1):
        tokens, targets = (t.to(device) for t in batch_of(stream, step, BATCH))
        with torch.autocast(device_type=device, dtype=torch.bfloat16,
                            enabled=bf16_autocast):
            out = model(tokens)
        loss = default_loss(out.logits, targets)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    return losses


def ops_of(graph_module):
    from dc_torch import lower
    found = {}
    for node in graph_module.graph.nodes:
        if node.op == "call_function":
            key = lower.op_key(node.target)
            found[key] = key in lower.OPS or key == "getitem"
    return found


def export_all(args):
    from dc_torch.errors import ExportError
    from dc_torch.export import export
    from dc_torch.safetensors import write_safetensors
    from dc_torch.trace import capture
    import transformers
    os.makedirs(args.out, exist_ok=True)
    record = {"torch": torch.__version__,
              "transformers": transformers.__version__, "models": {}}
    record["value-reads"] = value_read_checks()
    stream = token_stream(args.steps, BATCH)
    stream.numpy().tofile(os.path.join(args.out, "tokens.bin"))
    for name in args.models:
        entry = record["models"].setdefault(name, {})
        for attention in ("sdpa", "eager"):
            ok = True
            for dtype, batch in (("f32", BATCH), ("f32", BATCH // 2),
                                 ("bf16", BATCH)):
                tag = f"{name}-{dtype}-b{batch}"
                model = build(name, attention)
                try:
                    start = time.perf_counter()
                    exported = export(model, batch, SEQ, dtype=dtype)
                    seconds = time.perf_counter() - start
                except (ExportError, Exception) as e:
                    ok = False
                    entry[f"{attention}-error"] = "".join(
                        traceback.format_exception_only(type(e), e))
                    entry[f"{attention}-traceback"] = traceback.format_exc()
                    # Which ops the trace holds and which lower.py lacks.
                    try:
                        gm, _ = capture(build(name, attention),
                                        torch.zeros(batch, SEQ, dtype=torch.long),
                                        torch.zeros(batch, SEQ, dtype=torch.long))
                        entry[f"{attention}-unsupported"] = sorted(
                            k for k, v in ops_of(gm).items() if not v)
                    except Exception as e2:
                        entry[f"{attention}-capture-error"] = repr(e2)
                    print(f"{tag} ({attention}): {entry[f'{attention}-error']}",
                          file=sys.stderr)
                    break
                with open(os.path.join(args.out, f"{tag}.mlir"), "w") as f:
                    f.write(exported.mlir)
                if dtype == "f32" and batch == BATCH:
                    write_safetensors(os.path.join(args.out, f"{name}-init.safetensors"),
                                      exported.weights)
                    entry["parameters"] = sum(t.numel() for t in exported.weights.values())
                entry[f"{tag}-export-s"] = round(seconds, 2)
                entry[f"{tag}-mlir-lines"] = exported.mlir.count("\n")
                print(f"{tag} ({attention}): exported in {seconds:.1f} s",
                      file=sys.stderr)
            if ok:
                entry["attention"] = attention
                break
        if "attention" not in entry:
            continue
        # PyTorch's curves from the same weights (a fresh model, same seed).
        cpu = train_losses(build(name, "sdpa"), stream, args.steps, "cpu", False)
        entry["torch-f32"] = cpu
        if torch.cuda.is_available():
            entry["torch-bf16-autocast"] = train_losses(
                build(name, "sdpa"), stream, args.steps, "cuda", True)
        print(f"{name}: PyTorch f32 losses {cpu[0]:.5f} .. {cpu[-1]:.5f}",
              file=sys.stderr)
    with open(os.path.join(args.out, "export.json"), "w") as f:
        json.dump(record, f, indent=1)
    return 0 if all("attention" in e for e in record["models"].values()) else 1


def value_read_checks():
    """Python control flow on tensor values (torch 2.x reads them while
    tracing): on torch.arange alone it is kept, on the tokens refused."""
    from dc_torch.errors import ExportError
    from dc_torch.export import export
    sys.path.insert(0, os.path.join(HERE, "..", "test", "Frontend", "Inputs"))
    import bad_models
    import models
    out = {}
    try:
        mlir = export(models.branch_on_positions(), 2, 5).mlir
        doubled = " 2.0 : f32" in mlir  # x * 2, the branch taken
        out["branch_on_positions"] = "ok: exported" if doubled else \
            "FAIL: exported without the branch taken"
    except Exception as e:
        out["branch_on_positions"] = f"FAIL: {type(e).__name__}: {e}"
    try:
        export(bad_models.branch_on_data(), 2, 5)
        out["branch_on_data"] = "FAIL: exported"
    except ExportError as e:
        out["branch_on_data"] = ("ok: " if "the tokens" in str(e) else
                                 "FAIL: ") + str(e)
    except Exception as e:
        out["branch_on_data"] = f"FAIL: {type(e).__name__}: {e}"
    for k, v in out.items():
        print(f"{k}: {v}", file=sys.stderr)
    return out


# More decoder families, exported only (a coverage check, not trained):
# class name, config class, config overrides beyond the shared small sizes.
COVERAGE = [
    ("MistralForCausalLM", "MistralConfig", {"sliding_window": None}),
    ("Qwen2ForCausalLM", "Qwen2Config", {}),
    ("Qwen3ForCausalLM", "Qwen3Config", {"head_dim": 64}),
    ("Phi3ForCausalLM", "Phi3Config", {"pad_token_id": 0}),
    ("GemmaForCausalLM", "GemmaConfig", {"head_dim": 64}),
    ("Gemma2ForCausalLM", "Gemma2Config", {"head_dim": 64,
                                           "sliding_window": None}),
]


def coverage(args):
    """Exports each COVERAGE model (f32, batch 2) and prints one line per
    model: its parameter count and export time, or the error."""
    import transformers as tf
    from dc_torch.export import export
    results = {}
    for model_name, config_name, extra in COVERAGE:
        try:
            torch.manual_seed(0)
            config = getattr(tf, config_name)(
                vocab_size=VOCAB, hidden_size=256, intermediate_size=512,
                num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, max_position_embeddings=SEQ,
                use_cache=False, **extra)
            config._attn_implementation = "sdpa"
            model = getattr(tf, model_name)(config)
            model.eval()
            start = time.perf_counter()
            exported = export(model, BATCH, SEQ)
            line = (f"ok: {sum(t.numel() for t in exported.weights.values())}"
                    f" parameters, exported in "
                    f"{time.perf_counter() - start:.1f} s, "
                    f"{exported.mlir.count(chr(10))} lines")
            if args.out:
                with open(os.path.join(args.out, f"{model_name}.mlir"), "w") as f:
                    f.write(exported.mlir)
        except Exception as e:
            line = f"FAILED: {type(e).__name__}: {str(e)[:600]}"
        results[model_name] = line
        print(f"{model_name}: {line}")
    return 0 if all(v.startswith("ok") for v in results.values()) else 1


def dc_losses(path):
    with open(path) as f:
        return [float(v) for v in re.findall(r"^step=\d+ loss=(\S+)", f.read(), re.M)]


def compare(args):
    with open(os.path.join(args.out, "export.json")) as f:
        record = json.load(f)
    rows, failed = [], 0
    for log in args.logs:
        base = os.path.basename(log)
        name, dtype = base.split("-")[:2]
        ref = record["models"][name]["torch-f32"]
        have = dc_losses(log) if os.path.exists(log) else []
        if len(have) != len(ref):
            rows.append((base, len(have), "-", "-", "FAIL: step count"))
            failed += 1
            continue
        diff = max(abs(a - b) / abs(b) for a, b in zip(have, ref))
        if dtype == "f32":
            bound = args.f32_tolerance
        else:
            noise = record["models"][name].get("torch-bf16-autocast")
            noise = max(abs(a - b) / abs(b) for a, b in zip(noise, ref)) if noise else 0
            bound = max(2 * noise, 1e-2)
        ok = diff <= bound and all(math.isfinite(v) for v in have)
        failed += not ok
        rows.append((base, len(have), f"{have[0]:.5f} -> {have[-1]:.5f}",
                     f"{ref[0]:.5f} -> {ref[-1]:.5f}",
                     f"{diff:.2e} <= {bound:.1e}" if ok else f"FAIL {diff:.2e} > {bound:.1e}"))
    print("| run | steps | dc loss | PyTorch f32 loss | worst relative difference |")
    print("|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(str(x) for x in r) + " |")
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="command", required=True)
    e = sub.add_parser("export")
    e.add_argument("out")
    e.add_argument("--models", nargs="+", default=["llama", "gpt2"])
    e.add_argument("--steps", type=int, default=20)
    c = sub.add_parser("compare")
    c.add_argument("out")
    c.add_argument("logs", nargs="+")
    c.add_argument("--f32-tolerance", type=float, default=1e-4)
    v = sub.add_parser("coverage")
    v.add_argument("--out", help="write each exported step here")
    args = ap.parse_args()
    if args.command == "coverage":
        if args.out:
            os.makedirs(args.out, exist_ok=True)
        return coverage(args)
    return export_all(args) if args.command == "export" else compare(args)


if __name__ == "__main__":
    sys.exit(main())
