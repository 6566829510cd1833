#!/usr/bin/env python3
"""Tests of bench/kernel_names.py and bench/ncu_side_by_side.py on a
hand-made printed IR, source step and Nsight Compute CSVs: which op each
kernel is, how instances of an op are grouped and summed, how Inductor's
kernels split at the markers, and the units Nsight Compute writes.

  python3 bench/test_ncu_side_by_side.py
"""
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ncu_side_by_side  # noqa: E402

SOURCE = """func.func @train_step() {
  %l0_attn_norm_sumsq = linalg.generic
  %l0_attn_q_rot = linalg.generic
  %d_l0_attn_dq_unrot = linalg.generic
  %d_l0_mlp_norm_dot = linalg.generic
  %d_l0_mlp_norm_dw32 = linalg.generic
  %d_l1_mlp_norm_dot = linalg.generic
}
"""

PRINTED = """#loc1 = loc("{src}":2:3)
#loc2 = loc("{src}":3:3)
#loc3 = loc("{src}":4:3)
#loc4 = loc("{src}":5:3)
#loc5 = loc("{src}":6:3)
#loc6 = loc(callsite(#loc5 at #loc1))
#loc7 = loc("{src}":7:3)
    gpu.launch_func  @k::@train_step_kernel_1 blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) loc(#loc1)
    gpu.launch_func  @k::@train_step_kernel_2 blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) loc(#loc2)
    gpu.launch_func  @k::@train_step_kernel_3 blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) loc(#loc3)
    gpu.launch_func  @k::@train_step_kernel_4 blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) loc(#loc4)
    gpu.launch_func  @k::@train_step_kernel_5 blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) loc(#loc6)
    gpu.launch_func  @k::@train_step_kernel_6 blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) loc(#loc7)
"""

HEAD = ('"ID","Kernel Name","gpu__time_duration.sum","dram__bytes_read.sum",'
        '"dram__bytes_write.sum"\n"","","usecond","Mbyte","Mbyte"\n')


def csv_rows(rows):
    return "".join('"%d","%s","%s","%s","%s"\n' % ((i,) + row) for i, row in enumerate(rows))


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def side_by_side(names, dc, inductor):
    """The lines ncu_side_by_side.py prints for a kernel-name map and the
    two sides' CSV texts."""
    with tempfile.TemporaryDirectory() as tmp:
        paths = [os.path.join(tmp, n) for n in ("names.json", "dc.csv", "inductor.csv")]
        for path, text in zip(paths, (json.dumps(names), dc, inductor)):
            write(path, text)
        sys.argv = ["ncu_side_by_side.py"] + paths
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            ncu_side_by_side.main()
    return out.getvalue().splitlines()


class KernelNamesTest(unittest.TestCase):
    def test_follows_locations_to_the_defined_names(self):
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "step.mlir")
            write(src, SOURCE)
            printed = os.path.join(tmp, "printed.mlir")
            write(printed, PRINTED.format(src=src))
            out = subprocess.run([sys.executable, os.path.join(HERE, "kernel_names.py"), printed],
                                 check=True, capture_output=True, text=True).stdout
        self.assertEqual(json.loads(out), {
            "train_step_kernel_1": "l0_attn_norm_sumsq",
            "train_step_kernel_2": "l0_attn_q_rot",
            "train_step_kernel_3": "d_l0_attn_dq_unrot",
            "train_step_kernel_4": "d_l0_mlp_norm_dot",
            # A call-site location resolves to its callee's line.
            "train_step_kernel_5": "d_l0_mlp_norm_dw32",
            "train_step_kernel_6": "d_l1_mlp_norm_dot"})


class SideBySideTest(unittest.TestCase):
    def test_table(self):
        names = {"train_step_kernel_1": "l0_attn_norm_sumsq",
                 "train_step_kernel_2": "l0_attn_q_rot",
                 "train_step_kernel_3": "d_l0_attn_dq_unrot",
                 "train_step_kernel_4": "d_l0_mlp_norm_dot",
                 "train_step_kernel_5": "d_l0_mlp_norm_dw32",
                 "train_step_kernel_6": "d_l1_mlp_norm_dot",
                 "train_step_kernel_7": "d_final_norm_dot",
                 "train_step_kernel_8": "d_final_norm_dw32"}
        dc = HEAD + csv_rows([
            ("train_step_kernel_1", "30.0", "64", "32"),
            ("train_step_kernel_2", "20.0", "32", "32"),
            ("train_step_kernel_3", "22.0", "32", "32"),
            # Two instances of a layer's norm backward (with the residual
            # gradient): 30 + 5 and 40 (median 37.5).
            ("train_step_kernel_4", "30.0", "96", "32"),
            ("train_step_kernel_5", "5.0", "1", "0"),
            ("train_step_kernel_6", "40.0", "96", "32"),
            # The final norm's, without: 26 + 4.
            ("train_step_kernel_7", "26.0", "64", "32"),
            ("train_step_kernel_8", "4.0", "1", "0")])
        marks = [{"op": "rmsnorm forward", "bytes": 96 << 20},
                 {"op": "rmsnorm backward", "bytes": 96 << 20},
                 {"op": "rmsnorm backward + residual", "bytes": 128 << 20},
                 {"op": "rotary forward", "bytes": 64 << 20},
                 {"op": "rotary backward", "bytes": 64 << 20}]
        inductor = ("ncu-marks " + json.dumps(marks) + "\n" + HEAD + csv_rows([
            ("triton_per_fused_0", "25.0", "64", "32"), ("spin_kernel", "1", "0", "0"),
            ("triton_red_fused_1", "25.0", "64", "32"),
            ("triton_red_fused_2", "8.0", "0", "0"), ("spin_kernel", "1", "0", "0"),
            ("triton_red_fused_1", "30.0", "96", "32"),
            ("triton_red_fused_2", "10.0", "0", "0"), ("spin_kernel", "1", "0", "0"),
            ("triton_poi_fused_3", "20.0", "32", "32"), ("spin_kernel", "1", "0", "0"),
            ("triton_poi_fused_4", "2.2e1", "32", "32"), ("spin_kernel", "1", "0", "0")]))
        lines = side_by_side(names, dc, inductor)
        rows = {line.split(" | ")[0].lstrip("| "): line for line in lines}
        self.assertIn("| 30.0 us (1 x) | 25.0 us (1 x, 1 kernels) | 1.200x | 92 MiB | 92 MiB | 96 MiB |",
                      rows["rmsnorm forward"])
        # The final norm against the plain backward, the layers' against the
        # backward with the residual.
        self.assertIn("| 30.0 us (1 x) | 33.0 us (1 x, 2 kernels) | 0.909x |", rows["rmsnorm backward"])
        self.assertIn("| 37.5 us (2 x) | 40.0 us (1 x, 2 kernels) | 0.938x |",
                      rows["rmsnorm backward + residual"])
        # The rotations: forward and backward kernels kept apart.
        self.assertIn("| 20.0 us (1 x) | 20.0 us (1 x, 1 kernels) | 1.000x |", rows["rotary forward"])
        self.assertIn("| 22.0 us (1 x) | 22.0 us (1 x, 1 kernels) | 1.000x |", rows["rotary backward"])

    def test_medians_over_steps_and_calls(self):
        """Three profiled steps of dc's final norm backward (row group and
        second pass summed per step) and three calls of Inductor's op: the
        medians, not the sums."""
        names = {"train_step_kernel_7": "d_final_norm_dot",
                 "train_step_kernel_8": "d_final_norm_dw32",
                 "train_step_kernel_6": "l0_mlp_act"}
        dc = HEAD + csv_rows([
            ("train_step_kernel_6", "90.0", "200", "100"),
            ("train_step_kernel_7", "26.0", "64", "32"), ("train_step_kernel_8", "4.0", "1", "0"),
            ("train_step_kernel_6", "80.0", "200", "100"),
            ("train_step_kernel_7", "36.0", "64", "32"), ("train_step_kernel_8", "4.0", "1", "0"),
            ("train_step_kernel_6", "85.0", "200", "100"),
            ("train_step_kernel_7", "30.0", "64", "32"), ("train_step_kernel_8", "6.0", "1", "0")])
        marks = [{"op": "rmsnorm backward", "bytes": 96 << 20}] * 3 + \
            [{"op": "swiglu forward", "bytes": 264 << 20}] * 2
        inductor = ("ncu-marks " + json.dumps(marks) + "\n" + HEAD + csv_rows([
            ("triton_red_fused_1", "30.0", "64", "32"),
            ("triton_red_fused_2", "8.0", "0", "0"), ("spin_kernel", "1", "0", "0"),
            ("triton_red_fused_1", "40.0", "64", "32"),
            ("triton_red_fused_2", "8.0", "0", "0"), ("spin_kernel", "1", "0", "0"),
            ("triton_red_fused_1", "32.0", "64", "32"),
            ("triton_red_fused_2", "8.0", "0", "0"), ("spin_kernel", "1", "0", "0"),
            ("triton_poi_fused_3", "84.0", "200", "100"), ("spin_kernel", "1", "0", "0"),
            ("triton_poi_fused_3", "86.0", "200", "100"), ("spin_kernel", "1", "0", "0")]))
        lines = side_by_side(names, dc, inductor)
        rows = {line.split(" | ")[0].lstrip("| "): line for line in lines}
        # dc: 30, 40, 36 -> 36; Inductor: 38, 48, 40 -> 40.
        self.assertIn("| 36.0 us (3 x) | 40.0 us (3 x, 2 kernels) | 0.900x |",
                      rows["rmsnorm backward"])
        # dc: 90, 80, 85 -> 85; Inductor: 84, 86 -> 85.
        self.assertIn("| 85.0 us (3 x) | 85.0 us (2 x, 1 kernels) | 1.000x |",
                      rows["swiglu forward"])
        # One row an op, however often it was called.
        self.assertEqual(sum(line.startswith("| swiglu forward |") for line in lines), 1)


if __name__ == "__main__":
    unittest.main()
