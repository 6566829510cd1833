#!/usr/bin/env python3
"""Tests of peer_torch.py's pure helpers: no GPU, no torch.distributed.

  python3 bench/test_peer_helpers.py

The safetensors writer, dc's parameter names and layout, dc-run's token rows
and the token file need only the standard library. With torch (1.13 is
enough) the checkpoint of torch tensors is checked too; with DC_BIN set to a
dc build's bin directory (dc-gen-llama, dc-compile, dc-run), dc-run loads a
checkpoint the peer wrote and its step losses on the peer's data rows must
match a plain torch forward of the peer's model (the end-to-end check of
names, transposition, the QKV split and the token rule). Missing torch or
DC_BIN skips those tests.
"""
import array
import json
import math
import os
import re
import struct
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import peer_torch as peer  # noqa: E402  (must not import torch)

try:
    import torch
except ImportError:
    torch = None


def read_safetensors(path):
    """(header length, header dict, data bytes) parsed by hand."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    return n, header, raw[8 + n:]


def bf16_bits(x):
    """bf16 bits of a float that bf16 holds exactly (the top half of its f32)."""
    (bits,) = struct.unpack("<I", struct.pack("<f", x))
    assert bits & 0xFFFF == 0, x
    return bits >> 16


class SafetensorsTest(unittest.TestCase):
    def test_write_and_parse_back(self):
        f32 = struct.pack("<6f", 1.0, -2.5, 3.25, 0.0, 1e-3, -7.0)
        bf16_values = [1.0, -2.0, 0.5, 3.0, -0.125]
        bf16 = struct.pack("<5H", *map(bf16_bits, bf16_values))
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "t.safetensors")
            peer.write_safetensors(path, [
                ("a.weight", "F32", [2, 3], f32),
                ("b", "BF16", [5], lambda: bf16),  # lazily produced bytes
                ("empty", "F32", [0, 4], b""),
            ], {"source": "test"})
            n, header, data = read_safetensors(path)
            self.assertFalse(os.path.exists(path + ".tmp"))
        self.assertEqual(n % 8, 0)  # tensor data 8-byte aligned
        self.assertEqual(header["__metadata__"], {"source": "test"})
        self.assertEqual(list(header), ["__metadata__", "a.weight", "b", "empty"])
        self.assertEqual(header["a.weight"],
                         {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]})
        self.assertEqual(header["b"], {"dtype": "BF16", "shape": [5], "data_offsets": [24, 34]})
        self.assertEqual(header["empty"]["data_offsets"], [34, 34])
        self.assertEqual(len(data), 34)
        self.assertEqual(data[0:24], f32)
        self.assertEqual(data[24:34], bf16)
        self.assertEqual(data[24:26], b"\x80\x3f")  # bf16 1.0 = 0x3F80, little endian
        bits = struct.unpack("<5H", data[24:34])
        decoded = [struct.unpack("<f", struct.pack("<I", b << 16))[0] for b in bits]
        self.assertEqual(decoded, bf16_values)

    def test_padding_for_every_header_length(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "t.safetensors")
            for length in range(1, 12):
                peer.write_safetensors(path, [("x" * length, "F32", [1], b"\0\0\0\0")])
                n, header, data = read_safetensors(path)
                self.assertEqual(n % 8, 0)
                self.assertEqual(os.path.getsize(path), 8 + n + 4)
                self.assertNotIn("__metadata__", header)

    def test_rejects_wrong_sizes_and_names(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "t.safetensors")
            with self.assertRaises(peer.PeerError):
                peer.write_safetensors(path, [("a", "F32", [2], b"\0" * 4)])
            self.assertFalse(os.path.exists(path))
            with self.assertRaises(peer.PeerError):
                peer.write_safetensors(path, [("a", "F64", [1], b"\0" * 8)])
            with self.assertRaises(peer.PeerError):
                peer.write_safetensors(path, [("a", "F32", [1], b"\0" * 4)] * 2)
            with self.assertRaises(peer.PeerError):
                peer.write_safetensors(path, [], {"step": 0})


class NameMappingTest(unittest.TestCase):
    def test_two_layer_model(self):
        torch_names = ["tok_embeddings.weight"]
        for i in range(2):
            torch_names += [f"layers.{i}.{n}.weight" for n in (
                "attn_norm", "wqkv", "wo", "mlp_norm", "w_gate", "w_up", "w_down")]
        torch_names += ["norm.weight", "lm_head.weight"]
        expected = [("tok_embeddings", False)]
        for i in range(2):
            expected += [(f"layers.{i}.attn_norm", False), (f"layers.{i}.attn.wqkv", True),
                         (f"layers.{i}.attn.wo", True), (f"layers.{i}.mlp_norm", False),
                         (f"layers.{i}.mlp.w_gate", True), (f"layers.{i}.mlp.w_up", True),
                         (f"layers.{i}.mlp.w_down", True)]
        expected += [("norm", False), ("lm_head", True)]
        self.assertEqual([peer.dc_param_name(n) for n in torch_names], expected)

    def test_wrappers_and_unknown_names(self):
        self.assertEqual(peer.dc_param_name("_orig_mod.layers.1._orig_mod.wo.weight"),
                         ("layers.1.attn.wo", True))
        self.assertEqual(peer.dc_param_name("layers.10.w_down.weight"),
                         ("layers.10.mlp.w_down", True))
        for bad in ("layers.0.wqkv.bias", "layers.x.wo.weight", "output.weight", "layers.0"):
            with self.assertRaises(peer.PeerError):
                peer.dc_param_name(bad)


class TokenRowsTest(unittest.TestCase):
    # n = 20 tokens, rows of S = 4, B = 2 rows per rank, W = 2 ranks:
    # windows = 20 - 4 - 1 = 15, G = 4 global rows, start = ((s-1) 4 + g) 4 mod 15.
    tokens = list(range(100, 120))

    def rows(self, step, rank):
        return peer.token_rows(self.tokens, step, rank, 2, 2, 4)

    def test_first_step(self):
        self.assertEqual(self.rows(1, 0), ([[100, 101, 102, 103], [104, 105, 106, 107]],
                                           [[101, 102, 103, 104], [105, 106, 107, 108]]))
        # rank 1: global rows 2, 3 start at 8 and 12
        self.assertEqual(self.rows(1, 1), ([[108, 109, 110, 111], [112, 113, 114, 115]],
                                           [[109, 110, 111, 112], [113, 114, 115, 116]]))

    def test_wrap_around(self):
        # step 2: starts 16, 20, 24, 28 mod 15 = 1, 5, 9, 13
        self.assertEqual(peer.token_row_starts(2, 0, 2, 2, 4, 20), [1, 5])
        self.assertEqual(self.rows(2, 1), ([[109, 110, 111, 112], [113, 114, 115, 116]],
                                           [[110, 111, 112, 113], [114, 115, 116, 117]]))
        # step 3, rank 1, row 1: g = 3, (8 + 3) 4 = 44 mod 15 = 14, the last window
        inputs, targets = self.rows(3, 1)
        self.assertEqual(inputs[1], [114, 115, 116, 117])
        self.assertEqual(targets[1], [115, 116, 117, 118])

    def test_every_window_fits(self):
        n, seq = 23, 5
        for step in range(1, 30):
            for rank in range(3):
                for a in peer.token_row_starts(step, rank, 3, 2, seq, n):
                    self.assertTrue(0 <= a and a + 1 + seq <= n)

    def test_array_and_errors(self):
        tokens = array.array("i", self.tokens)
        inputs, targets = peer.token_rows(tokens, 1, 0, 1, 1, 4)
        self.assertEqual(list(inputs[0]), [100, 101, 102, 103])
        with self.assertRaises(peer.PeerError):
            peer.token_rows(list(range(5)), 1, 0, 1, 1, 4)  # needs S + 2 = 6 tokens
        with self.assertRaises(peer.PeerError):
            peer.token_rows(self.tokens, 0, 0, 1, 1, 4)  # steps count from 1
        with self.assertRaises(peer.PeerError):
            peer.token_rows(self.tokens, 1, 2, 2, 1, 4)


class TokenFileTest(unittest.TestCase):
    def test_deterministic_and_in_range(self):
        with tempfile.TemporaryDirectory() as tmp:
            a, b, c = (os.path.join(tmp, x) for x in "abc")
            peer.write_token_file(a, 1000, 37, 5)
            peer.write_token_file(b, 1000, 37, 5)
            peer.write_token_file(c, 1000, 37, 6)
            with open(a, "rb") as f:
                raw = f.read()
            with open(b, "rb") as f:
                self.assertEqual(raw, f.read())
            with open(c, "rb") as f:
                self.assertNotEqual(raw, f.read())
            self.assertEqual(len(raw), 4000)
            tokens = struct.unpack("<1000i", raw)
            self.assertTrue(all(0 <= t < 37 for t in tokens))
            self.assertEqual(len(set(tokens)), 37)  # 1000 draws hit every id
            self.assertEqual(list(peer.read_token_file(a)), list(tokens))
            with self.assertRaises(peer.PeerError):
                peer.write_token_file(a, 0, 37, 5)

    def test_read_rejects_partial_tokens(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "t")
            with open(path, "wb") as f:
                f.write(b"\0" * 6)
            with self.assertRaises(peer.PeerError):
                peer.read_token_file(path)

    def test_cli_writes_without_torch(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "tokens.bin")
            code = ("import sys; sys.path.insert(0, sys.argv[1]); import peer_torch; "
                    "status = peer_torch.main(['--write-tokens', sys.argv[2], '--n', '50', "
                    "'--vocab', '11', '--seed', '2']); "
                    "assert 'torch' not in sys.modules, 'imported torch'; sys.exit(status)")
            run = subprocess.run([sys.executable, "-c", code, HERE, path],
                                 capture_output=True, text=True)
            self.assertEqual(run.returncode, 0, run.stderr)
            self.assertEqual(os.path.getsize(path), 200)
            with open(path, "rb") as f:
                raw = f.read()
            other = os.path.join(tmp, "other.bin")
            peer.write_token_file(other, 50, 11, 2)
            with open(other, "rb") as f:
                self.assertEqual(raw, f.read())


class ArgsTest(unittest.TestCase):
    def parse(self, *argv):
        return peer.parse_args(list(argv))

    def fails(self, *argv):
        with open(os.devnull, "w") as null:
            stderr, sys.stderr = sys.stderr, null
            try:
                with self.assertRaises(SystemExit):
                    self.parse(*argv)
            finally:
                sys.stderr = stderr

    def test_defaults_unchanged(self):
        args = self.parse("--config", "tiny")
        self.assertEqual((args.mode, args.compile, args.compile_blocks, args.mixed_precision,
                          args.reshard_after_forward, args.prefetch, args.data, args.save_init),
                         ("fsdp2", False, False, False, True, 0, None, None))
        self.assertEqual(args.reduce_dtype, "bf16")  # no policy: the parameters' dtype
        self.assertEqual(self.parse("--mixed-precision").reduce_dtype, "fp32")
        self.assertEqual(self.parse("--mixed-precision", "--reduce-dtype", "bf16").reduce_dtype,
                         "bf16")
        self.assertIsNone(self.parse("--mode", "replicated").reduce_dtype)

    def test_conflicts(self):
        self.fails("--compile", "--compile-blocks")
        self.fails("--mode", "replicated", "--prefetch", "1")
        self.fails("--mode", "replicated", "--no-reshard-after-forward")
        self.fails("--prefetch", "-1")
        self.fails("--reduce-dtype", "fp32")  # needs --mixed-precision
        self.fails("--mode", "replicated", "--mixed-precision", "--reduce-dtype", "bf16")
        self.fails("--write-tokens", "x")  # needs --n
        self.fails("--n", "5")

    def test_import_is_cheap(self):
        code = ("import sys; sys.path.insert(0, sys.argv[1]); import peer_torch; "
                "sys.exit('torch' in sys.modules)")
        self.assertEqual(subprocess.run([sys.executable, "-c", code, HERE]).returncode, 0)


# dc-gen-llama's tiny config (the e2e test's model)
TINY = dict(dim=16, ffn=32, heads=2, layers=2, vocab=32, batch=2, seq=8)


class TinyModel(object):
    """The peer's parameters (torch names and layouts) for a small model,
    built without nn.RMSNorm (torch 1.13 has none), with a plain forward
    that does what peer_torch's Block and Decoder do."""

    def __init__(self, sizes, seed, std, dtype):
        nn = torch.nn
        d, f, v = sizes["dim"], sizes["ffn"], sizes["vocab"]
        self.sizes = sizes
        gen = torch.Generator().manual_seed(seed)

        def weight(*shape, scale=std):
            return nn.Parameter((torch.randn(*shape, generator=gen) * scale).to(dtype))

        def norm(n):  # not 1, so that a mixed-up norm shows in the loss
            return nn.Parameter((1 + 0.3 * torch.randn(n, generator=gen)).to(dtype))

        def holder(**params):
            m = nn.Module()
            for k, p in params.items():
                if isinstance(p, nn.Module):
                    setattr(m, k, p)
                else:
                    m.register_parameter(k, p)
            return m

        root = nn.Module()
        root.tok_embeddings = holder(weight=weight(v, d, scale=1.0))
        root.layers = nn.ModuleList(holder(
            attn_norm=holder(weight=norm(d)), wqkv=holder(weight=weight(3 * d, d)),
            wo=holder(weight=weight(d, d)), mlp_norm=holder(weight=norm(d)),
            w_gate=holder(weight=weight(f, d)), w_up=holder(weight=weight(f, d)),
            w_down=holder(weight=weight(d, f))) for _ in range(sizes["layers"]))
        root.norm = holder(weight=norm(d))
        root.lm_head = holder(weight=weight(v, d))
        self.module = root

    def loss(self, tokens, targets):
        F = torch.nn.functional
        m, s = self.module, self.sizes
        p = {k: v.detach().double() for k, v in m.named_parameters()}

        def rms(x, w):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + peer.RMS_EPS) * w

        h = p["tok_embeddings.weight"][tokens]
        b, n, d = h.shape
        heads = s["heads"]
        causal = torch.ones(n, n, dtype=torch.bool).tril()
        for i in range(s["layers"]):
            w = {k[len(f"layers.{i}."):-len(".weight")]: v for k, v in p.items()
                 if k.startswith(f"layers.{i}.")}
            qkv = rms(h, w["attn_norm"]) @ w["wqkv"].t()
            q, k, v = qkv.view(b, n, 3, heads, d // heads).permute(2, 0, 3, 1, 4).unbind(0)
            scores = (q @ k.transpose(-1, -2)) / math.sqrt(d // heads)
            attn = scores.masked_fill(~causal, float("-inf")).softmax(-1) @ v
            h = h + attn.transpose(1, 2).reshape(b, n, d) @ w["wo"].t()
            u = rms(h, w["mlp_norm"])
            h = h + (F.silu(u @ w["w_gate"].t()) * (u @ w["w_up"].t())) @ w["w_down"].t()
        logits = rms(h, p["norm.weight"]) @ p["lm_head.weight"].t()
        return float(F.cross_entropy(logits.flatten(0, 1), targets.flatten()))


@unittest.skipIf(torch is None, "needs torch")
class CheckpointOfTorchTensorsTest(unittest.TestCase):
    def check(self, dtype, name):
        model = TinyModel(TINY, 1, 0.5, dtype)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "w.safetensors")
            peer.save_dc_checkpoint(torch, model.module, path, {"source": "test"})
            n, header, data = read_safetensors(path)
        self.assertEqual(n % 8, 0)
        element = torch.tensor([], dtype=dtype).element_size()
        for torch_name, param in model.module.named_parameters():
            dc_name, transpose = peer.dc_param_name(torch_name)
            entry = header[dc_name]
            expected = param.detach().t() if transpose else param.detach()
            self.assertEqual(entry["dtype"], name)
            self.assertEqual(entry["shape"], list(expected.shape))
            begin, end = entry["data_offsets"]
            self.assertEqual(end - begin, expected.numel() * element)
            raw = data[begin:end]
            if dtype == torch.bfloat16:  # raw bits, element by element
                bits = expected.contiguous().view(torch.int16).flatten().tolist()
                self.assertEqual(list(struct.unpack(f"<{len(bits)}h", raw)), bits)
            else:
                values = expected.contiguous().flatten().tolist()
                self.assertEqual(list(struct.unpack(f"<{len(values)}f", raw)), values)
        self.assertEqual(header["layers.1.attn.wqkv"]["shape"], [16, 48])
        self.assertEqual(header["lm_head"]["shape"], [16, 32])
        self.assertEqual(header["tok_embeddings"]["shape"], [32, 16])
        count = sum(p.numel() for p in model.module.parameters())
        self.assertEqual(count, peer.param_count(TINY))

    def test_f32(self):
        self.check(torch.float32, "F32")

    def test_bf16(self):
        self.check(torch.bfloat16, "BF16")


DC_BIN = os.environ.get("DC_BIN")


@unittest.skipIf(torch is None or not DC_BIN, "needs torch and DC_BIN (a dc build's bin)")
class DcRunEndToEndTest(unittest.TestCase):
    """dc-run loads the peer's checkpoint and, on the peer's token rows, its
    losses equal the peer model's forward (lr 0: every step sees the same
    weights, so each step's loss checks that step's rows)."""

    world, steps = 2, 4

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = cls.tmp.name
        size_flags = [f"--{k}={v}" for k, v in TINY.items()]
        cls.tool("dc-gen-llama", *size_flags, "--dtype", "f32", "-o", "t.mlir")
        cls.tool("dc-compile", "t.mlir", f"--world-size={cls.world}",
                 "--lowering=host", "-o", "t.so")
        cls.tool("dc-run", "t.so", "--steps", "0", "--save", "ref.safetensors")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    @classmethod
    def tool(cls, name, *argv):
        run = subprocess.run([os.path.join(DC_BIN, name), *argv], cwd=cls.dir,
                             capture_output=True, text=True, timeout=300)
        if run.returncode:
            raise AssertionError(f"{name} {' '.join(argv)} failed:\n{run.stdout}{run.stderr}")
        return run.stdout + run.stderr

    def test_reference_layout(self):
        _, header, _ = read_safetensors(os.path.join(self.dir, "ref.safetensors"))
        params = {k: v["shape"] for k, v in header.items()
                  if k != "__metadata__" and not k.endswith((".exp_avg", ".exp_avg_sq",
                                                             ".master"))}
        model = TinyModel(TINY, 0, 1.0, torch.float32)
        mine = {}
        for torch_name, p in model.module.named_parameters():
            dc_name, transpose = peer.dc_param_name(torch_name)
            mine[dc_name] = list(p.shape[::-1] if transpose else p.shape)
        self.assertEqual(mine, params)

    def run_dc(self, dtype):
        model = TinyModel(TINY, 7, 0.5, dtype)
        weights = os.path.join(self.dir, "peer.safetensors")
        tokens_path = os.path.join(self.dir, "tokens.bin")
        peer.save_dc_checkpoint(torch, model.module, weights, {"source": "test"})
        # 40 tokens: windows = 40 - 8 - 1 = 31, 4 rows of 8 a step: wraps on step 2
        peer.write_token_file(tokens_path, 40, TINY["vocab"], 3)
        out = self.tool("dc-run", "t.so", "--load", weights, "--data", tokens_path,
                        "--lr", "0", "--steps", str(self.steps))
        dc_losses = [float(x) for x in re.findall(r"^step=\d+ loss=(\S+)", out, re.M)]
        self.assertEqual(len(dc_losses), self.steps, out)
        stream = torch.tensor(list(peer.read_token_file(tokens_path)), dtype=torch.int64)
        peer_losses = []
        for step in range(1, self.steps + 1):
            per_rank = []
            for rank in range(self.world):
                inputs, targets = peer.token_rows(stream, step, rank, self.world,
                                                  TINY["batch"], TINY["seq"])
                per_rank.append(model.loss(torch.stack(inputs), torch.stack(targets)))
            peer_losses.append(sum(per_rank) / self.world)
        return dc_losses, peer_losses

    def test_losses_match_f32(self):
        dc_losses, peer_losses = self.run_dc(torch.float32)
        for dc_loss, peer_loss in zip(dc_losses, peer_losses):
            self.assertAlmostEqual(dc_loss, peer_loss, delta=1e-4 * abs(peer_loss))
        self.assertGreater(max(peer_losses) - min(peer_losses), 1e-3)  # rows differ per step

    def test_bf16_checkpoint_loads(self):
        dc_losses, peer_losses = self.run_dc(torch.bfloat16)
        for dc_loss, peer_loss in zip(dc_losses, peer_losses):
            self.assertAlmostEqual(dc_loss, peer_loss, delta=1e-4 * abs(peer_loss))


if __name__ == "__main__":
    unittest.main()
