#!/usr/bin/env python3
"""Tests of bench/kernel_table.py and bench/calibrate.py on a hand-made
profiled IR, profile, peer JSON and predicted trace: which products and
kernels they find, the sums and ratios they print, and the refusal of a
trace that does not match the IR.

  python3 bench/test_kernel_tables.py
"""
import contextlib
import io
import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import calibrate  # noqa: E402
import kernel_table  # noqa: E402

# The shape of what dc-compile prints before dc-profile-ops: top-level ops
# indented by 4, bodies deeper. Counted ops: fill, generic, two matmuls,
# dc.attention (dc.gather_start is not counted).
IR = """#map = affine_map<(d0, d1) -> (d0, d1)>
#map1 = affine_map<(d0, d1) -> (d0)>
#map6 = affine_map<(d0, d1, d2) -> (d2, d0)>
#map7 = affine_map<(d0, d1, d2) -> (d2, d1)>
#map8 = affine_map<(d0, d1, d2) -> (d0, d1)>
module {
  func.func @train_step(%x: tensor<8192x2048xbf16>) {
    %f = dc.gather_start %p : tensor<2048x6144xbf16>
    %0 = linalg.fill ins(%cst : f32) outs(%e : tensor<8192xf32>) -> tensor<8192xf32>
    %1 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<8192x2048xbf16>) outs(%0 : tensor<8192xf32>) {
    ^bb0(%in: bf16, %out: f32):
      %a = arith.extf %in : bf16 to f32
      %b = arith.mulf %a, %a : f32
      %c = arith.addf %out, %b : f32
      linalg.yield %c : f32
    } -> tensor<8192xf32>
    %2 = linalg.matmul ins(%x, %w : tensor<8192x2048xbf16>, tensor<2048x6144xbf16>) outs(%y : tensor<8192x6144xbf16>) -> tensor<8192x6144xbf16>
    %3 = linalg.matmul indexing_maps = [#map6, #map7, #map8] ins(%x, %dy : tensor<8192x2048xbf16>, tensor<8192x6144xbf16>) outs(%dw : tensor<2048x6144xbf16>) -> tensor<2048x6144xbf16>
    %o, %lse = dc.attention %q, %k, %v causal scale = 0.125 : tensor<64x2048x128xbf16>, tensor<64x2048x128xbf16>, tensor<64x2048x128xbf16> -> tensor<64x2048x128xbf16>, tensor<64x2048xf32>
  }
}
"""
FLOP = 2 * 8192 * 6144 * 2048


class Files:
    def __init__(self, directory):
        self.dir = directory

    def write(self, name, value):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(value if isinstance(value, str) else json.dumps(value))
        return path


def run(main, argv):
    out = io.StringIO()
    old = sys.argv
    sys.argv = argv
    try:
        with contextlib.redirect_stdout(out):
            main()
    finally:
        sys.argv = old
    return out.getvalue()


class StepFiles(unittest.TestCase):
    """The hand-made IR and its measured profile in a temporary folder."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.files = Files(self.tmp.name)
        self.ir = self.files.write("step.mlir", IR)
        # Seconds per counted op, keyed as dc-run writes them.
        self.profile = self.files.write("profile.json", {"ops": {
            "train_step:0": 5e-6, "train_step:1": 22e-6,
            "train_step:2": 250e-6, "train_step:3": 300e-6,
            "train_step:4": 150e-6}})

    def tearDown(self):
        self.tmp.cleanup()


class KernelTableTest(StepFiles):
    def test_products_with_their_transposes(self):
        shapes = kernel_table.gemm_shapes(self.ir)
        self.assertEqual(
            sorted((g["m"], g["n"], g["k"], g["ta"], g["tb"], g["count"])
                   for g in shapes),
            [(2048, 6144, 8192, True, False, 1),
             (8192, 6144, 2048, False, False, 1)])

    def test_table_against_the_peer(self):
        peer = {"torch": "t", "device": "d", "copy_bytes_per_s": 4e12,
                "ops": {name: {"inductor_ms": 0.02, "eager_ms": 0.1,
                               "bytes": 8e7}
                        for name in kernel_table.NAMED},
                "gemms": [dict(m=8192, n=6144, k=2048, ta=False, tb=False,
                               torch_ms=0.3),
                          dict(m=2048, n=6144, k=8192, ta=True, tb=False,
                               torch_ms=0.3)]}
        text = run(kernel_table.main, [
            "kernel_table.py", self.ir, self.profile,
            self.files.write("peer.json", peer)])
        # The norm needs four kernels; this step has two of them.
        self.assertIn("| rmsnorm forward | (not found in the step) |", text)
        # 250 us against 300: torch / dc = 1.2; 300 against 300: 1.
        self.assertIn("| 8192 x 6144 x 2048 (-) | 1 | 250.0 us | 300.0 us "
                      f"| {FLOP / 250e-6 / 1e12:.0f} | 1.200 |", text)
        self.assertIn("| 2048 x 6144 x 8192 (A) | 1 | 300.0 us | 300.0 us",
                      text)
        self.assertIn("dc 0.55 ms, torch.matmul 0.60 ms: dc at 109.1% of "
                      "torch.matmul's speed", text)


def rotation(name, negated_first):
    """A rotary rotation op as dc-compile prints it: the forward selects the
    negated product for the first half, the backward the other."""
    pick = "%8, %7" if negated_first else "%7, %8"
    return f"""    {name} = linalg.generic {{indexing_maps = [#map4, #map5, #map6, #map6, #map4], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]}} ins(%x, %x, %c, %s : tensor<4x2048x16x2x64xbf16>, tensor<4x2048x16x2x64xbf16>, tensor<2048x64xf32>, tensor<2048x64xf32>) outs(%e : tensor<4x2048x16x2x64xbf16>) {{
    ^bb0(%in: bf16, %in_1: bf16, %in_2: f32, %in_3: f32, %out: bf16):
      %4 = linalg.index 3 : index
      %5 = arith.cmpi eq, %4, %c0 : index
      %6 = arith.extf %in_1 : bf16 to f32
      %7 = arith.mulf %6, %in_3 : f32
      %8 = arith.negf %7 : f32
      %9 = arith.select %5, {pick} : f32
      %10 = arith.extf %in : bf16 to f32
      %11 = arith.mulf %10, %in_2 : f32
      %12 = arith.addf %11, %9 : f32
      %13 = arith.truncf %12 : f32 to bf16
      linalg.yield %13 : bf16
    }} -> tensor<4x2048x16x2x64xbf16>
"""


ROTARY_IR = """#map4 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>
#map5 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, -d3 + 1, d4)>
#map6 = affine_map<(d0, d1, d2, d3, d4) -> (d1, d4)>
module {
  func.func @train_step(%x: tensor<4x2048x16x2x64xbf16>) {
""" + rotation("%0", True) + rotation("%1", True) + \
    rotation("%2", False) + """  }
}
"""


class RotaryTableTest(StepFiles):
    def test_rotations_from_the_extra_step(self):
        peer = {"torch": "t", "device": "d", "copy_bytes_per_s": 4e12,
                "ops": {name: {"inductor_ms": 0.02, "eager_ms": 0.1,
                               "bytes": 8e7}
                        for name in kernel_table.NAMED},
                "gemms": []}
        extra_ir = self.files.write("rotary.mlir", ROTARY_IR)
        extra_profile = self.files.write("rotary.json", {"ops": {
            "train_step:0": 20e-6, "train_step:1": 30e-6,
            "train_step:2": 40e-6}})
        args = ["kernel_table.py", self.ir, self.profile,
                self.files.write("peer.json", peer)]
        without = run(kernel_table.main, args)
        self.assertIn("| rotary forward | (not found in the step) |", without)
        text = run(kernel_table.main, args + ["--extra", extra_ir,
                                              extra_profile])
        # Forward: the mean of the two forward rotations; 8e7 bytes in
        # 25 us against Inductor's 20 us.
        self.assertIn("| rotary forward | 25.0 us | 3.20 TB/s (80%) | "
                      "20.0 us |", text)
        self.assertIn("| 1.25x |", text)
        self.assertIn("| rotary backward | 40.0 us |", text)
        # Without a same-size copy in the peer JSON, its columns stay empty.
        self.assertIn("| 1.25x | | |", text)
        # With one: 8e7 bytes copied in 22 us (91% of 4 TB/s); dc's 25 us
        # forward is 1.14x that copy.
        for op in peer["ops"].values():
            op["copy_same_bytes_ms"] = 0.022
        args[3] = self.files.write("peer2.json", peer)
        text = run(kernel_table.main, args + ["--extra", extra_ir,
                                              extra_profile])
        self.assertIn("| 1.25x | 22.0 us (91%) | 1.14x |", text)
        # A name the first step has stays the first step's.
        self.assertIn("| rmsnorm forward | (not found in the step) |", text)


    def test_compare_builds(self):
        ir = self.files.write("rotary.mlir", ROTARY_IR)
        slow = self.files.write("slow.json", {"ops": {
            "train_step:0": 20e-6, "train_step:1": 30e-6,
            "train_step:2": 40e-6}})
        fast = self.files.write("fast.json", {"ops": {
            "train_step:0": 10e-6, "train_step:1": 20e-6,
            "train_step:2": 30e-6}})
        text = run(kernel_table.main, [
            "kernel_table.py", "--compare", f"slow={ir},{slow}",
            f"fast={ir},{fast}"])
        self.assertIn("| op | slow | fast |", text)
        self.assertIn("| rotary forward | 25.0 us | 15.0 us |", text)
        self.assertIn("| rotary backward | 40.0 us | 30.0 us |", text)
        self.assertIn("| rmsnorm forward | - | - |", text)


class CalibrateTest(StepFiles):
    def trace(self, names, durations):
        # dc-report numbers every op (the gather too); compute events only
        # for the counted ones, in order.
        events = [{"ph": "X", "cat": "compute", "dur": dur,
                   "args": {"index": i + 1, "op": name, "bytes": 1000}}
                  for i, (name, dur) in enumerate(zip(names, durations))]
        events.append({"ph": "X", "cat": "collective", "dur": 7,
                       "args": {"index": 0, "op": "dc.gather_start"}})
        return self.files.write("predicted.json", {"traceEvents": events})

    def test_by_kind(self):
        names = ["linalg.fill", "linalg.generic", "linalg.matmul",
                 "linalg.matmul", "dc.attention"]
        text = run(calibrate.main, [
            "calibrate.py", self.ir, self.profile,
            self.trace(names, [10, 20, 200, 200, 100])])
        # Products: 0.4 ms predicted, 0.55 measured, 2 x FLOP in 0.55 ms.
        self.assertIn(f"| matrix products | 2 | 0.40 | 0.55 | 1.38 | "
                      f"{2 * FLOP / 550e-6 / 1e12:.0f} TFLOP/s |", text)
        self.assertIn("| row reductions | 1 | 0.02 | 0.02 | 1.10 |", text)
        self.assertIn("| attention forward | 1 | 0.10 | 0.15 | 1.50 |", text)
        self.assertIn("| all | 5 | 0.53 | 0.73 | 1.37 | |", text)

    def test_refuses_a_trace_of_another_step(self):
        names = ["linalg.fill", "linalg.matmul", "linalg.generic",
                 "linalg.matmul", "dc.attention"]
        with self.assertRaises(SystemExit) as raised:
            run(calibrate.main, ["calibrate.py", self.ir, self.profile,
                                 self.trace(names, [1] * 5)])
        self.assertIn("not the profiled IR's", str(raised.exception))


if __name__ == "__main__":
    unittest.main()
