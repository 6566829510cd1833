// dc-attach-target's memory budget, which every planning pass,
// dc-verify-schedule and dc-report read from the module's #dc.target: bytes,
// or a fraction of the target's memory ("0.9" or "90%"). dc-report prints
// the budget (a budget of all of it as the target's memory). The cpu preset
// has 16 GiB.

// A fraction in (0, 1] or a percentage in (0, 100] is a share of the
// target's memory, rounded down to whole bytes.
// RUN: dc-opt %s --dc-zero3="world-size=2" --dc-attach-target="memory-budget=0.5 target=cpu" --dc-report -o /dev/null | FileCheck %s --check-prefix=HALF
// RUN: dc-opt %s --dc-zero3="world-size=2" --dc-attach-target="memory-budget=50% target=cpu" --dc-report -o /dev/null | FileCheck %s --check-prefix=HALF
// RUN: dc-opt %s --dc-zero3="world-size=2" --dc-attach-target="memory-budget=1 target=cpu" --dc-report -o /dev/null | FileCheck %s --check-prefix=ALL
// RUN: dc-opt %s --dc-zero3="world-size=2" --dc-attach-target="memory-budget=100% target=cpu" --dc-report -o /dev/null | FileCheck %s --check-prefix=ALL
// RUN: dc-opt %s --dc-zero3="world-size=2" --dc-attach-target="memory-budget=1.5% target=cpu" --dc-report -o /dev/null | FileCheck %s --check-prefix=SMALL
// HALF-LABEL: dc-report @step
// HALF: of budget 8.00 GiB (8589934592 B),
// ALL-LABEL: dc-report @step
// ALL: of cpu's memory 16.00 GiB (17179869184 B),
// 0.015 * 2^34 = 257698037.76
// SMALL-LABEL: dc-report @step
// SMALL: of budget 245.76 MiB (257698037 B),

// Any other plain number must be a whole number of bytes: "1.5" and "0" are
// errors (they were read as 2 B and 0 B), "4096" is 4096 B.
// RUN: not dc-opt %s --dc-zero3="world-size=2" --dc-attach-target="memory-budget=1.5 target=cpu" --dc-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=BYTES15
// RUN: not dc-opt %s --dc-zero3="world-size=2" --dc-attach-target="memory-budget=0 target=cpu" --dc-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=BYTES0
// RUN: dc-opt %s --dc-zero3="world-size=2" --dc-attach-target="memory-budget=4096 target=cpu" --dc-report -o /dev/null | FileCheck %s --check-prefix=BYTES4096
// BYTES15: error: memory budget '1.5' is neither a fraction in (0, 1] nor a whole number of bytes
// BYTES0: error: memory budget '0' is neither a fraction in (0, 1] nor a whole number of bytes
// BYTES4096-LABEL: dc-report @step
// BYTES4096: of budget 4.00 KiB (4096 B),

// NaN is no fraction: "nan%" was a budget of -8 EiB.
// RUN: not dc-opt %s --dc-zero3="world-size=2" --dc-attach-target="memory-budget=nan% target=cpu" --dc-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=NAN
// NAN: error: memory budget fraction must be in (0, 1], got nan
// A percentage that is no number names the whole text.
// RUN: not dc-opt %s --dc-zero3="world-size=2" --dc-attach-target="memory-budget=abc% target=cpu" --dc-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=PERCENT
// PERCENT: error: cannot parse memory budget 'abc%': give bytes

// A percentage outside (0, 100] is an error.
// RUN: not dc-opt %s --dc-zero3="world-size=2" --dc-attach-target="memory-budget=-3% target=cpu" --dc-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// RUN: not dc-opt %s --dc-zero3="world-size=2" --dc-attach-target="memory-budget=0% target=cpu" --dc-prefetch -o /dev/null 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not dc-opt %s --dc-zero3="world-size=2" --dc-attach-target="memory-budget=150% target=cpu" --dc-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=OVER
// RUN: not dc-opt %s --dc-zero3="world-size=2" --dc-attach-target="memory-budget=150% target=cpu" --dc-verify-schedule -o /dev/null 2>&1 | FileCheck %s --check-prefix=OVER
// RUN: not dc-opt %s --dc-zero3="world-size=2" --dc-attach-target=memory-budget=101% --dc-verify-schedule -o /dev/null 2>&1 | FileCheck %s --check-prefix=JUSTOVER
// NEGATIVE: error: memory budget fraction must be in (0, 1], got -3.000000e-02
// ZERO: error: memory budget fraction must be in (0, 1], got 0.000000e+00
// OVER: error: memory budget fraction must be in (0, 1], got 1.500000e+00
// JUSTOVER: error: memory budget fraction must be in (0, 1], got 1.010000e+00

// Text that is neither; a negative byte count.
// RUN: not dc-opt %s --dc-zero3="world-size=2" --dc-attach-target="memory-budget=lots target=cpu" --dc-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=GARBAGE
// RUN: not dc-opt %s --dc-zero3="world-size=2" --dc-attach-target=memory-budget=16GiBs --dc-prefetch -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNIT
// RUN: not dc-opt %s --dc-zero3="world-size=2" --dc-attach-target=memory-budget=-3 --dc-verify-schedule -o /dev/null 2>&1 | FileCheck %s --check-prefix=MINUS
// GARBAGE: error: cannot parse memory budget 'lots': give bytes (e.g. 16GiB, 2.5e9; under 8 EiB) or a fraction (0.9, 90%)
// UNIT: error: cannot parse memory budget '16GiBs': give bytes (e.g. 16GiB, 2.5e9; under 8 EiB) or a fraction (0.9, 90%)
// MINUS: error: memory budget '-3' is neither a fraction in (0, 1] nor a whole number of bytes

// A byte count of 8 EiB or more would overflow int64_t (1e30 became a
// negative budget): an error, with or without a unit.
// RUN: not dc-opt %s --dc-zero3="world-size=2" --dc-attach-target="memory-budget=1e30 target=cpu" --dc-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=HUGE
// RUN: not dc-opt %s --dc-zero3-pipeline="world-size=2 memory-budget=1e10TiB" -o /dev/null 2>&1 | FileCheck %s --check-prefix=HUGEUNIT
// HUGE: error: cannot parse memory budget '1e30': give bytes (e.g. 16GiB, 2.5e9; under 8 EiB)
// HUGEUNIT: error: cannot parse memory budget '1e10TiB': give bytes (e.g. 16GiB, 2.5e9; under 8 EiB)

// An unknown target is an error.
// RUN: not dc-opt %s --dc-zero3="world-size=2" --dc-attach-target="memory-budget=90% target=nosuch" --dc-verify-schedule -o /dev/null 2>&1 | FileCheck %s --check-prefix=TARGET
// RUN: not dc-opt %s --dc-zero3="world-size=2" --dc-attach-target="memory-budget=0.9 target=nosuch" --dc-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=TARGET
// TARGET: error: cannot load target 'nosuch': unknown target 'nosuch': neither a preset (h100, h200, h100-cluster, h200-cluster, cpu) nor an existing file

func.func @step(%w: tensor<64x64xf32> {dc.param = #dc.param<id = 0>}, %x: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %y = arith.addf %w, %x : tensor<64x64xf32>
  return %y : tensor<64x64xf32>
}
