#!/usr/bin/env python3
"""Tests of bench/dc_vs_fsdp2_table.py on hand-made result folders: the
numbers it computes (medians, ratios, peaks, exposed communication from a
trace, the parameter-count check, the loss-curve comparison).

  python3 bench/test_dc_vs_fsdp2_table.py
"""
import json
import os
import sys
import tempfile
import unittest
import io
import contextlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import dc_vs_fsdp2_table as table  # noqa: E402
import merge_traces  # noqa: E402

GIB = 2 ** 30


def dc_log(path, times, device_peak, losses=None, stamp=True):
    with open(path, "w") as f:
        f.write("[0s] dc-run: artifact.so, step train_step, 2 ranks\n")
        for i, t in enumerate(times):
            loss = losses[i] if losses else 10.0
            f.write("%sstep=%d loss=%.9g time_ms=%.3f peak_mem_bytes=%d device_peak_bytes=%d "
                    "device_used_bytes=1 tokens_per_s=1\n" % ("[3s] " if stamp else "", i + 1, loss, t,
                                                             GIB, device_peak))


def report(path, step_s, peak, state, budget, param_types):
    params = [{"type": t} for t in param_types]
    with open(path, "w") as f:
        json.dump([{"stepSeconds": step_s, "peakDeviceBytes": peak, "trainerStateBytes": state,
                    "budgetBytes": budget, "exposedCollectiveSeconds": 0.0,
                    "exposedCopySeconds": 0.0, "params": params}], f)


def peer(path, step_ms, peak_gib, params, losses=None):
    with open(path, "w") as f:
        json.dump({"ok": True, "step_ms_median": step_ms, "peak_GiB": peak_gib, "params": params,
                   "tflops_per_gpu": 1.0, "losses": losses or []}, f)


class TableTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.out = self.dir.name

    def tearDown(self):
        self.dir.cleanup()

    def render(self):
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            table.main([self.out])
        return buffer.getvalue()

    def path(self, name):
        return os.path.join(self.out, name)

    def test_ratios_peaks_and_prediction(self):
        # Steps 1 and 2 are warm-ups; the median of 100, 90, 110, 95 is 97.5.
        dc_log(self.path("dc-A16-w2-plain.log"), [2000, 500, 100, 90, 110, 95], 20 * GIB)
        dc_log(self.path("dc-A16-w1.log"), [2000, 500, 90, 90, 90, 90], 30 * GIB, stamp=False)
        report(self.path("A16-w2-plain.report.json"), 0.075, 14 * GIB, 2 * GIB, 100 * GIB,
               ["tensor<4x8xbf16>", "tensor<8xbf16>"])
        peer(self.path("peer-A-fsdp2.json"), 130.0, 16.0, 40)
        peer(self.path("peer-A-fsdp2_blocks.json"), 120.0, 10.0, 40)
        peer(self.path("peer-A-replicated_compile.json"), 78.0, 12.0, 40)
        text = self.render()
        self.assertIn("| dc plain | 97.50 | 20.00 |", text)
        self.assertIn("Same model: dc 40 parameters, peer 40: equal", text)
        # The best FSDP2 variant is the fastest one, not the first.
        self.assertIn("| dc step / best FSDP2 (fsdp2_blocks) | 0.812 |", text)
        self.assertIn("| dc peak / that FSDP2's peak | 2.000 |", text)
        self.assertIn("| dc step / replicated torch.compile | 1.250 |", text)
        # Planned: the step's 14 GiB and 2 GiB of optimizer state.
        self.assertIn("| dc plain: measured / planned peak | 1.250 |", text)
        self.assertIn("| dc plain: measured / predicted step | 1.300 |", text)
        self.assertIn("| exposed communication (2-rank step - 1-rank step) | 7.50 ms |", text)

    def test_different_models_are_flagged(self):
        dc_log(self.path("dc-B-w2-plain.log"), [1, 1, 1], GIB)
        report(self.path("B-w2-plain.report.json"), 0.001, GIB, 0, GIB, ["tensor<4x8xbf16>"])
        peer(self.path("peer-B-fsdp2.json"), 1.0, 1.0, 33)
        self.assertIn("Same model: dc 32 parameters, peer 33: DIFFERENT", self.render())

    def test_exposed_communication_from_trace(self):
        # Per step: ops at [10, 210) and [300, 450) us inside the entry
        # [0, 500); a gather at [150, 250): 40 us of it while no op runs;
        # the compute stream idles 10 + 90 + 50 = 150 us. The first step
        # (cold) is left out.
        events = []
        for s in range(3):
            b = s * 1000 + (5000 if s == 0 else 0)
            events += [
                dict(name="entry", ph="X", ts=b, dur=500, pid=0, cat="compute"),
                dict(name="train_step:1", ph="X", ts=b + 10, dur=200, pid=0, cat="compute"),
                dict(name="train_step:2", ph="X", ts=b + 300, dur=150, pid=0, cat="compute"),
                dict(name="gather", ph="X", ts=b + 150, dur=100, pid=0, cat="all-gather"),
                # Rank 1's spans are not rank 0's.
                dict(name="gather", ph="X", ts=b + 460, dur=30, pid=1, cat="all-gather"),
            ]
        path = self.path("A16-w2-prof.trace.json")
        with open(path, "w") as f:
            json.dump({"traceEvents": events}, f)
        result = table.exposed_from_trace(path)
        self.assertEqual(result["steps"], 2)
        self.assertAlmostEqual(result["exposed_ms"], 0.040)
        self.assertAlmostEqual(result["idle_ms"], 0.150)

    def test_loss_curves(self):
        dc_log(self.path("curve-dc-A16.log"), [1, 1, 1], GIB, losses=[10.0, 9.0, 8.0])
        peer(self.path("curve-peer-A16.json"), 1.0, 1.0, 1, losses=[10.0, 9.09, 8.0])
        peer(self.path("curve-peer2-A16.json"), 1.0, 1.0, 1, losses=[10.0, 9.0, 8.04])
        text = self.render()
        self.assertIn("largest relative loss difference dc vs FSDP2 9.90e-03", text)
        self.assertIn("FSDP2 vs itself with foreach AdamW (its noise band) 9.90e-03", text)
        self.assertIn("| 2 | 9.00000 | 9.09000 | 9.00000 |", text)

    def test_unreadable_inputs_are_skipped(self):
        with open(self.path("peer-A-fsdp2.json"), "w") as f:
            f.write("not json")
        with open(self.path("dc-A16-w2-plain.log"), "w") as f:
            f.write("dc-run: error: out of memory\n")
        self.assertNotIn("## config A", self.render())


class MergeTracesTest(unittest.TestCase):
    def test_step_cut_and_shifted_beside_the_prediction(self):
        measured = [
            {"name": "thread_name", "ph": "M", "pid": 0, "tid": 100, "args": {"name": "all-gather"}},
            {"name": "step", "ph": "X", "ts": 1000, "dur": 500, "pid": 0, "tid": 0, "cat": "compute"},
            {"name": "step", "ph": "X", "ts": 2000, "dur": 400, "pid": 0, "tid": 0, "cat": "compute"},
            # Straddles the second step's start: clipped to it.
            {"name": "g", "ph": "X", "ts": 1900, "dur": 200, "pid": 0, "tid": 100, "cat": "all-gather"},
            # Rank 1 and the first step are left out.
            {"name": "g", "ph": "X", "ts": 2100, "dur": 50, "pid": 1, "tid": 100, "cat": "all-gather"},
            {"name": "g", "ph": "X", "ts": 1100, "dur": 50, "pid": 0, "tid": 100, "cat": "all-gather"},
        ]
        predicted = [
            {"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "train_step"}},
            {"name": "op", "ph": "X", "ts": 0, "dur": 300, "pid": 0, "tid": 1},
            {"name": "memory", "ph": "C", "ts": 0, "pid": 0, "args": {"device": 5}},
        ]
        events, step_ms = merge_traces.merge(measured, predicted, rank=0, step=0)
        self.assertAlmostEqual(step_ms, 0.4)
        spans = [(e["pid"], e["name"], e["ts"], e["dur"]) for e in events if e["ph"] == "X"]
        self.assertEqual(spans, [(0, "step", 0, 400), (0, "g", 0, 100), (1, "op", 0, 300)])
        names = {e["args"]["name"] for e in events if e.get("name") == "process_name"}
        self.assertEqual(names, {"measured: rank 0, step 2", "predicted"})
        self.assertIn({"name": "memory", "ph": "C", "ts": 0, "pid": 1, "args": {"device": 5}}, events)


if __name__ == "__main__":
    unittest.main()
