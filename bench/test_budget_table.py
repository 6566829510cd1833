#!/usr/bin/env python3
"""Tests of bench/budget_table.py on a hand-made artifact folder (dc-report
text) and result folder (dc-run logs): the median it takes, the overheads
against the unbudgeted step, the pools check and a failed run.

  python3 bench/test_budget_table.py
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
import budget_table as table  # noqa: E402

GIB = 2 ** 30


def report(path, step_ms, trainer_ms, step_peak, state, recomputed=0, offloaded=0):
    with open(path, "w") as f:
        f.write("dc-report @train_step\n")
        f.write(f"  predicted step            {step_ms:.3f} ms\n")
        f.write(f"  optimizer step             1.000 ms   trainer step     {trainer_ms:.3f} ms\n")
        f.write(f"  peak device memory    x GiB ({step_peak + state} B) (step x GiB ({step_peak} B)"
                f" + optimizer state x GiB ({state} B)) of budget\n")
        f.write(f"  offloaded activations  1, x GiB ({offloaded} B), added 0 ms\n")
        f.write(f"  recomputed activations 1, x GiB ({recomputed} B), added 0 ms\n")


def log(path, times, pools):
    with open(path, "w") as f:
        f.write("[0s] dc-run: artifact.so\n")
        for i, t in enumerate(times):
            f.write(f"step={i + 1} loss=10.0 time_ms={t:.3f} peak_mem_bytes={pools} "
                    f"device_peak_bytes={pools + GIB} grad_norm=1.0\n")


class BudgetTableTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.art = os.path.join(self.dir.name, "art")
        self.out = os.path.join(self.dir.name, "out")
        os.makedirs(self.art)
        os.makedirs(self.out)

    def tearDown(self):
        self.dir.cleanup()

    def rows(self):
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            table.main([self.art, self.out])
        lines = buffer.getvalue().splitlines()[2:]
        return {line.split(" | ")[0].strip("| ") + line.split(" | ")[1]:
                [c.strip() for c in line.strip("|").split("|")] for line in lines}

    def test_median_of_steps_four_on_and_overheads(self):
        report(os.path.join(self.art, "none-report.txt"), 90.0, 100.0, 10 * GIB, 5 * GIB)
        report(os.path.join(self.art, "joint-40-report.txt"), 95.0, 105.0, 6 * GIB, 5 * GIB,
               recomputed=GIB, offloaded=GIB // 2)
        # Warm-up steps 1-3 are ignored; the median of steps 4-9.
        log(os.path.join(self.out, "none.log"), [300, 90, 90, 99, 101, 100, 100, 98, 102], 8 * GIB)
        log(os.path.join(self.out, "joint-40.log"), [300, 95, 95, 110, 107, 108, 108, 120, 106],
            4 * GIB)
        rows = self.rows()
        none, joint = rows["none-"], rows["joint-40%"]
        self.assertEqual(none[5], "100.00")  # median of 99, 101, 100, 100, 98, 102
        self.assertEqual(joint[5], "108.00")
        self.assertEqual(joint[2:4], ["1.00", "0.50"])
        self.assertEqual(joint[6], "1.029")  # 108 / 105
        self.assertEqual(joint[7], "+5.0%")  # 105 / 100 predicted
        self.assertEqual(joint[8], "+8.0%")  # 108 / 100 measured
        self.assertEqual(joint[9], "6.00 + 5.00")
        self.assertEqual(joint[11], "yes")  # 4 GiB of pools <= 6 GiB planned

    def test_short_or_missing_runs_are_failures(self):
        report(os.path.join(self.art, "none-report.txt"), 90.0, 100.0, 10 * GIB, 5 * GIB)
        report(os.path.join(self.art, "offload-20-report.txt"), 190.0, 200.0, 8 * GIB, 5 * GIB)
        log(os.path.join(self.out, "none.log"), [300, 90, 90, 100, 100, 100], 11 * GIB)
        log(os.path.join(self.out, "offload-20.log"), [300, 200, 200], 4 * GIB)
        rows = self.rows()
        self.assertEqual(rows["none-"][11], "NO")  # 11 GiB of pools > 10 planned
        self.assertEqual(rows["offload-20%"][5], "FAILED")
        self.assertEqual(rows["offload-20%"][7], "+100.0%")

    def test_rounds_and_the_links_rate(self):
        report(os.path.join(self.art, "none-report.txt"), 90.0, 100.0, 10 * GIB, 5 * GIB)
        report(os.path.join(self.art, "joint-typical-40-report.txt"), 95.0, 104.0, 6 * GIB,
               5 * GIB)
        # Three rounds; each overhead against its own round's none.
        for k, (none, joint) in enumerate([(100, 104), (100, 110), (110, 121)], 1):
            suffix = "" if k == 1 else f".r{k}"
            log(os.path.join(self.out, f"none{suffix}.log"), [300] + [none] * 8, 8 * GIB)
            log(os.path.join(self.out, f"joint-typical-40{suffix}.log"), [300] + [joint] * 8,
                4 * GIB)
        # Two rounds traced: reloads of 50, 40 and 55 GB/s; a small one
        # (latency-bound) and an offload are not counted.
        def span(cat, size, dur_us):
            return {"ph": "X", "cat": cat, "name": "reload", "ts": 0, "dur": dur_us,
                    "pid": 0, "tid": 700, "args": {"bytes": size}}
        mib64 = 64 * 2 ** 20
        with open(os.path.join(self.out, "joint-typical-40.trace.json"), "w") as f:
            json.dump({"traceEvents": [span("copy h2d (reload)", mib64, mib64 / 50e3),
                                       span("copy h2d (reload)", 4096, 50.0),
                                       span("copy d2h (offload)", mib64, mib64 / 10e3)]}, f)
        with open(os.path.join(self.out, "joint-typical-40.r3.trace.json"), "w") as f:
            json.dump([span("copy h2d (reload)", mib64, mib64 / 40e3),
                       span("copy h2d (reload)", mib64, mib64 / 55e3)], f)
        rows = self.rows()
        joint = rows["joint-typical-40%"]
        self.assertEqual(joint[0], "joint-typical")
        self.assertEqual(joint[5], "110.00")  # median of 104, 110, 121
        self.assertEqual(joint[8], "+10.0%")  # median of +4, +10, +10
        self.assertEqual(joint[13], "+4.0% / +10.0% / +10.0%")
        self.assertEqual(joint[14], "50.0 (40.0)")
        self.assertEqual(rows["none-"][14], "-")

    def test_plans_not_run_have_no_row(self):
        # gpu_budget_bench.sh ONLY=...: artifacts packed but not run.
        report(os.path.join(self.art, "none-report.txt"), 90.0, 100.0, 10 * GIB, 5 * GIB)
        report(os.path.join(self.art, "joint-40-report.txt"), 95.0, 105.0, 6 * GIB, 5 * GIB)
        report(os.path.join(self.art, "offload-40-report.txt"), 95.0, 205.0, 6 * GIB, 5 * GIB)
        log(os.path.join(self.out, "none.log"), [300] + [100] * 8, 8 * GIB)
        log(os.path.join(self.out, "joint-40.log"), [300] + [105] * 8, 4 * GIB)
        self.assertEqual(sorted(self.rows()), ["joint-40%", "none-"])



if __name__ == "__main__":
    unittest.main()
