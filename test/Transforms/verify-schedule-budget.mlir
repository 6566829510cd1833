// RUN: dc-opt %s --dc-zero3="world-size=2" --dc-attach-target=memory-budget=56KiB --dc-verify-schedule | FileCheck %s --check-prefix=FITS
// RUN: dc-opt %s --dc-zero3="world-size=2" --dc-attach-target=memory-budget=50KiB --dc-verify-schedule -verify-diagnostics -o /dev/null
// RUN: not dc-opt %s --dc-zero3="world-size=2" --dc-attach-target=memory-budget=56KiB --dc-verify-schedule="optimizer-state-bytes=1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=STATE
// RUN: not dc-opt %s --dc-zero3="world-size=2" --dc-attach-target=memory-budget=56KiB --dc-verify-schedule="optimizer-state-bytes=-1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// RUN: not dc-opt %s --dc-zero3="world-size=2" --dc-report="optimizer-state-bytes=-1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=REPORT-NEGATIVE
// RUN: not dc-opt %s --dc-attach-target=memory-budget=lots --dc-verify-schedule 2>&1 | FileCheck %s --check-prefix=BADTEXT

// Live while the weight is gathered: its 8 KiB shard, the 16 KiB input x,
// the 16 KiB gathered weight and the 16 KiB result (a returned value lives
// for the whole step): 56 KiB. The gather (which carries the addf's
// location) is where that peak is first reached.
// FITS-LABEL: func.func @step
func.func @step(%w: tensor<64x64xf32> {dc.param = #dc.param<id = 0>}, %x: tensor<64x64xf32>) -> tensor<64x64xf32> {
  // expected-error @+1 {{device memory peaks here at 56.00 KiB (57344 B), over the budget of 50.00 KiB (51200 B) by 6.00 KiB (6144 B)}}
  %y = arith.addf %w, %x : tensor<64x64xf32>
  return %y : tensor<64x64xf32>
}

// The trainer's optimizer state counts too: one byte per element of the
// weight's 2048-element shard takes the same peak 2 KiB over.
// STATE: error: device memory peaks here at 58.00 KiB (59392 B) (the step's 56.00 KiB (57344 B) and the trainer's optimizer state, 2.00 KiB (2048 B)), over the budget of 56.00 KiB (57344 B) by 2.00 KiB (2048 B)
// NEGATIVE: error: dc-verify-schedule: optimizer-state-bytes must be >= 0, got -1
// REPORT-NEGATIVE: error: dc-report: optimizer-state-bytes must be >= 0, got -1

// BADTEXT: cannot parse memory budget 'lots': give bytes (e.g. 16GiB, 2.5e9; under 8 EiB) or a fraction (0.9, 90%)
