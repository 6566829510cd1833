// dc-attach-target loads the target once and attaches it, its budget
// resolved to bytes, as the module's #dc.target; every pass after it reads
// the attribute.

// A preset and a share of its memory: the cpu preset (16 GiB), host code.
// RUN: dc-opt %s --dc-attach-target="target=cpu memory-budget=50%" | FileCheck %s --check-prefix=CPU
// CPU: module attributes {dc.target = #dc.target<name = "cpu", lowering = host, memory_budget = 8589934592, numbers = {
// CPU-SAME: deviceMemoryBytes = 17179869184 : i64
// CPU-SAME: foldsFills = false
// CPU-SAME: matmulFlops16 = 1.000000e+11 : f64

// The defaults: the h200 preset, all its memory, compiled for sm_90; the
// GPU's shape comes with it.
// RUN: dc-opt %s --dc-attach-target | FileCheck %s --check-prefix=H200
// H200: #dc.target<name = "h200", lowering = cuda_sm90, memory_budget = 149250113536, numbers = {
// H200-SAME: allGatherCurve = [{busBandwidth = 1.200000e+10 : f64, bytes = 1048576 : i64},
// H200-SAME: multiprocessors = 132 : i64
// H200-SAME: sharedMemoryPerBlock = 49152 : i64

// An H100 node; a GPU target's schedule with its compute on the host.
// RUN: dc-opt %s --dc-attach-target="target=h100 lowering=host memory-budget=8.9GiB" | FileCheck %s --check-prefix=H100
// H100: #dc.target<name = "h100", lowering = host, memory_budget = 9556302234, numbers = {
// H100-SAME: deviceMemoryBytes = 84825604096 : i64
// H100-SAME: memoryBandwidth = 2.800000e+12 : f64

// A JSON description: its name and numbers, resolved into the attribute
// (nothing reads the file again).
// RUN: echo '{"base": "h200", "name": "slow-h200", "matmulFlops16": 5e14}' > %t.json
// RUN: dc-opt %s --dc-attach-target="target=%t.json memory-budget=1GiB" | FileCheck %s --check-prefix=JSON
// JSON: #dc.target<name = "slow-h200", lowering = cuda_sm90, memory_budget = 1073741824, numbers = {
// JSON-SAME: matmulFlops16 = 5.000000e+14 : f64

// A second attach replaces the first; the printed attribute parses back to
// the same module.
// RUN: dc-opt %s --dc-attach-target=target=h200 --dc-attach-target="target=cpu memory-budget=64KiB" | FileCheck %s --check-prefix=AGAIN
// AGAIN: #dc.target<name = "cpu", lowering = host, memory_budget = 65536,
// AGAIN-NOT: h200
// With keep-existing, a targeted module keeps its target and budget; only
// a given lowering changes. A module without one gets the given target.
// RUN: dc-opt %s --dc-attach-target="target=cpu memory-budget=64KiB" --dc-attach-target="target=h200 keep-existing=1" | FileCheck %s --check-prefix=KEEP
// KEEP: #dc.target<name = "cpu", lowering = host, memory_budget = 65536,
// RUN: dc-opt %s --dc-attach-target="target=h100 memory-budget=1GiB" --dc-attach-target="keep-existing=1 lowering=host" | FileCheck %s --check-prefix=KEEP-LOWERING
// KEEP-LOWERING: #dc.target<name = "h100", lowering = host, memory_budget = 1073741824,
// RUN: dc-opt %s --dc-attach-target="target=cpu keep-existing=1" | FileCheck %s --check-prefix=KEEP-NONE
// KEEP-NONE: #dc.target<name = "cpu", lowering = host,
// RUN: dc-opt %s --dc-attach-target=target=h200 > %t.once.mlir
// RUN: dc-opt %t.once.mlir > %t.twice.mlir
// RUN: diff %t.once.mlir %t.twice.mlir

// The planners and dc-report read the attached budget.
// RUN: dc-opt %s --dc-zero3="world-size=2" --dc-attach-target="target=cpu memory-budget=4096" --dc-report -o /dev/null | FileCheck %s --check-prefix=REPORT
// REPORT: of budget 4.00 KiB (4096 B),

// Errors name the module: an unknown target, an unknown lowering.
// RUN: not dc-opt %s --dc-attach-target=target=a100 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// UNKNOWN: error: cannot load target 'a100': unknown target 'a100': neither a preset (h100, h200, h100-cluster, h200-cluster, cpu) nor an existing file
// RUN: not dc-opt %s --dc-attach-target=lowering=rocm 2>&1 | FileCheck %s --check-prefix=LOWERING
// LOWERING: error: dc-attach-target: unknown lowering 'rocm' (host, cuda_sm90)
// RUN: echo '{"base": "h200", "lowering": "tpu"}' > %t.bad.json
// RUN: not dc-opt %s --dc-attach-target=target=%t.bad.json 2>&1 | FileCheck %s --check-prefix=FILE
// FILE: error: cannot load target '{{.*}}bad.json': {{.*}}bad.json: field "lowering" must be "host" or "cuda_sm90"

func.func @step(%w: tensor<64x64xf32> {dc.param = #dc.param<id = 0>}, %x: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %y = arith.addf %w, %x : tensor<64x64xf32>
  return %y : tensor<64x64xf32>
}
