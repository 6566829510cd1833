// The memory-budget option every planning pass and dc-verify-schedule take:
// bytes, or a fraction of the target's memory ("0.9" or "90%"). dc-report
// prints the budget it resolved. The cpu preset has 16 GiB.

// A fraction in (0, 1] or a percentage in (0, 100] is a share of the
// target's memory, rounded down to whole bytes.
// RUN: dc-opt %s --dc-zero3="world-size=2" --dc-report="memory-budget=0.5 target=cpu" -o /dev/null | FileCheck %s --check-prefix=HALF
// RUN: dc-opt %s --dc-zero3="world-size=2" --dc-report="memory-budget=50% target=cpu" -o /dev/null | FileCheck %s --check-prefix=HALF
// RUN: dc-opt %s --dc-zero3="world-size=2" --dc-report="memory-budget=1 target=cpu" -o /dev/null | FileCheck %s --check-prefix=ALL
// RUN: dc-opt %s --dc-zero3="world-size=2" --dc-report="memory-budget=100% target=cpu" -o /dev/null | FileCheck %s --check-prefix=ALL
// RUN: dc-opt %s --dc-zero3="world-size=2" --dc-report="memory-budget=1.5% target=cpu" -o /dev/null | FileCheck %s --check-prefix=SMALL
// HALF-LABEL: dc-report @step
// HALF: of budget 8.00 GiB (8589934592 B),
// ALL-LABEL: dc-report @step
// ALL: of budget 16.00 GiB (17179869184 B),
// 0.015 * 2^34 = 257698037.76
// SMALL-LABEL: dc-report @step
// SMALL: of budget 245.76 MiB (257698037 B),

// Any other plain number must be a whole number of bytes: "1.5" and "0" are
// errors (they were read as 2 B and 0 B), "4096" is 4096 B.
// RUN: not dc-opt %s --dc-zero3="world-size=2" --dc-report="memory-budget=1.5 target=cpu" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BYTES15
// RUN: not dc-opt %s --dc-zero3="world-size=2" --dc-report="memory-budget=0 target=cpu" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BYTES0
// RUN: dc-opt %s --dc-zero3="world-size=2" --dc-report="memory-budget=4096 target=cpu" -o /dev/null | FileCheck %s --check-prefix=BYTES4096
// BYTES15: error: memory budget '1.5' is neither a fraction in (0, 1] nor a whole number of bytes
// BYTES0: error: memory budget '0' is neither a fraction in (0, 1] nor a whole number of bytes
// BYTES4096-LABEL: dc-report @step
// BYTES4096: of budget 4.00 KiB (4096 B),

// NaN is no fraction: "nan%" was a budget of -8 EiB.
// RUN: not dc-opt %s --dc-zero3="world-size=2" --dc-report="memory-budget=nan% target=cpu" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NAN
// NAN: error: memory budget fraction must be in (0, 1], got nan
// A percentage that is no number names the whole text.
// RUN: not dc-opt %s --dc-zero3="world-size=2" --dc-report="memory-budget=abc% target=cpu" -o /dev/null 2>&1 | FileCheck %s --check-prefix=PERCENT
// PERCENT: error: cannot parse memory budget 'abc%': give bytes

// A percentage outside (0, 100] is an error, in a planning pass and in
// dc-verify-schedule alike.
// RUN: not dc-opt %s --dc-zero3="world-size=2" --dc-report="memory-budget=-3% target=cpu" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// RUN: not dc-opt %s --dc-zero3="world-size=2" --dc-prefetch="memory-budget=0% target=cpu" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not dc-opt %s --dc-zero3="world-size=2" --dc-report="memory-budget=150% target=cpu" -o /dev/null 2>&1 | FileCheck %s --check-prefix=OVER
// RUN: not dc-opt %s --dc-zero3="world-size=2" --dc-verify-schedule="memory-budget=150% target=cpu" -o /dev/null 2>&1 | FileCheck %s --check-prefix=OVER
// RUN: not dc-opt %s --dc-zero3="world-size=2" --dc-verify-schedule="memory-budget=101%" -o /dev/null 2>&1 | FileCheck %s --check-prefix=JUSTOVER
// NEGATIVE: error: memory budget fraction must be in (0, 1], got -3.000000e-02
// ZERO: error: memory budget fraction must be in (0, 1], got 0.000000e+00
// OVER: error: memory budget fraction must be in (0, 1], got 1.500000e+00
// JUSTOVER: error: memory budget fraction must be in (0, 1], got 1.010000e+00

// Text that is neither; a negative byte count.
// RUN: not dc-opt %s --dc-zero3="world-size=2" --dc-report="memory-budget=lots target=cpu" -o /dev/null 2>&1 | FileCheck %s --check-prefix=GARBAGE
// RUN: not dc-opt %s --dc-zero3="world-size=2" --dc-prefetch="memory-budget=16GiBs" -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNIT
// RUN: not dc-opt %s --dc-zero3="world-size=2" --dc-verify-schedule="memory-budget=-3" -o /dev/null 2>&1 | FileCheck %s --check-prefix=MINUS
// GARBAGE: error: cannot parse memory budget 'lots': give bytes (e.g. 16GiB, 2.5e9; under 8 EiB) or a fraction (0.9, 90%)
// UNIT: error: cannot parse memory budget '16GiBs': give bytes (e.g. 16GiB, 2.5e9; under 8 EiB) or a fraction (0.9, 90%)
// MINUS: error: memory budget '-3' is neither a fraction in (0, 1] nor a whole number of bytes

// A byte count of 8 EiB or more would overflow int64_t (1e30 became a
// negative budget): an error, with or without a unit.
// RUN: not dc-opt %s --dc-zero3="world-size=2" --dc-report="memory-budget=1e30 target=cpu" -o /dev/null 2>&1 | FileCheck %s --check-prefix=HUGE
// RUN: not dc-opt %s --dc-zero3-pipeline="world-size=2 memory-budget=1e10TiB" -o /dev/null 2>&1 | FileCheck %s --check-prefix=HUGEUNIT
// HUGE: error: cannot parse memory budget '1e30': give bytes (e.g. 16GiB, 2.5e9; under 8 EiB)
// HUGEUNIT: error: cannot parse memory budget '1e10TiB': give bytes (e.g. 16GiB, 2.5e9; under 8 EiB)

// A fraction needs the target's memory: an unknown target is an error
// (dc-verify-schedule loads the target only for that).
// RUN: not dc-opt %s --dc-zero3="world-size=2" --dc-verify-schedule="memory-budget=90% target=nosuch" -o /dev/null 2>&1 | FileCheck %s --check-prefix=TARGET
// RUN: not dc-opt %s --dc-zero3="world-size=2" --dc-report="memory-budget=0.9 target=nosuch" -o /dev/null 2>&1 | FileCheck %s --check-prefix=TARGET
// TARGET: error: cannot load target 'nosuch': unknown target 'nosuch': neither a preset (h200, h200-cluster, h100-cluster, cpu) nor an existing file

func.func @step(%w: tensor<64x64xf32> {dc.param = #dc.param<id = 0>}, %x: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %y = arith.addf %w, %x : tensor<64x64xf32>
  return %y : tensor<64x64xf32>
}
