// RUN: dc-opt %s --dc-attach-target="target=%S/Inputs/toy-target.json memory-budget=100KiB" --dc-offload-activations="min-bytes=1024" --dc-attach-target=memory-budget=100KiB --dc-verify-schedule | FileCheck %s --check-prefix=NONE
// RUN: dc-opt %s --dc-attach-target="target=%S/Inputs/toy-target.json memory-budget=90KiB" --dc-offload-activations="min-bytes=1024" --dc-attach-target=memory-budget=90KiB --dc-verify-schedule | FileCheck %s --check-prefix=SOME
// RUN: dc-opt %s --dc-attach-target="target=%S/Inputs/toy-target.json memory-budget=70KiB" --dc-offload-activations="min-bytes=1024" --dc-attach-target=memory-budget=70KiB --dc-verify-schedule | FileCheck %s --check-prefix=ALL
// RUN: dc-opt %s --dc-attach-target="target=%S/Inputs/toy-target.json memory-budget=70KiB" --dc-offload-activations="min-bytes=1024" --dc-report -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: dc-opt %s --dc-attach-target="target=%S/Inputs/toy-target.json memory-budget=70KiB" --dc-offload-activations="min-bytes=1024" --dc-attach-target="target=%S/Inputs/toy-copies-slow-compute-target.json memory-budget=70KiB" --dc-report -o /dev/null | FileCheck %s --check-prefix=SLOWED
// RUN: not dc-opt %s --dc-attach-target="target=%S/Inputs/toy-target.json memory-budget=70KiB" --dc-offload-activations="min-bytes=1024 keep-last=2" 2>&1 | FileCheck %s --check-prefix=KEEP
// RUN: not dc-opt %s --dc-attach-target="target=%S/Inputs/toy-target.json memory-budget=60KiB" --dc-offload-activations="min-bytes=1024" 2>&1 | FileCheck %s --check-prefix=FLOOR
// RUN: dc-opt %s --dc-attach-target="target=%S/Inputs/toy-planned-slower-target.json memory-budget=90KiB" --dc-offload-activations="min-bytes=1024" --dc-attach-target=memory-budget=90KiB --dc-verify-schedule | FileCheck %s --check-prefix=SLOW
// RUN: dc-opt %s --dc-attach-target="target=%S/Inputs/toy-planned-slower-target.json memory-budget=90KiB" --dc-offload-activations="min-bytes=1024" --dc-report -o /dev/null | FileCheck %s --check-prefix=SLOW-REPORT

// Three 16 KiB activations a1, a2, a3 made in forward and read again in
// backward. Just in time the step peaks at 96.25 KiB (at the g3 matmul, with
// all three alive). On the toy target a copy of 16 KiB takes 16.4 us each
// way and a matmul 524 us, so every gap can hide both copies.

// At 100 KiB the step fits: nothing moves.
// NONE-LABEL: func.func @step
// NONE-NOT: dc.offload_start

// At 90 KiB one offload is enough: a1, the longest idle, goes to host right
// after its last forward use, its copy overlaps the next matmul, and it is
// reloaded one matmul before its backward use.
// SOME-LABEL: func.func @step
// SOME: %[[A1:.*]] = linalg.matmul ins(%arg0, %arg0
// SOME-NEXT: %[[A2:.*]] = linalg.matmul ins(%[[A1]], %arg0
// SOME-NEXT: %[[O:.*]] = dc.offload_start %[[A1]] : tensor<64x64xf32>
// SOME-NEXT: linalg.matmul ins(%[[A2]], %arg0
// SOME-NEXT: %[[H:.*]] = dc.wait %[[O]] : !dc.future<!dc.host<tensor<64x64xf32>>>
// SOME-NOT: dc.offload_start
// SOME: %[[L:.*]] = dc.reload_start %[[H]] : !dc.host<tensor<64x64xf32>>
// SOME-NEXT: %[[G1:.*]] = linalg.matmul
// SOME-NEXT: %[[BACK:.*]] = dc.wait %[[L]] : !dc.future<tensor<64x64xf32>>
// SOME-NEXT: arith.mulf %[[G1]], %[[BACK]]
// The reloaded buffer is released right after that last use, where the
// memory timeline frees it.
// SOME-NEXT: dc.release %[[BACK]] : tensor<64x64xf32>

// The same at 90 KiB on a target whose link runs at 1 GB/s typically and
// 25 MB/s at its slowest (hostLinkPlanningBandwidth): the planner costs
// a1's copies at 655 us, longer than a matmul, so it waits for the offload
// two matmuls on and issues the reload two matmuls before the use; the
// report, at the typical rate, predicts no copy time exposed.
// SLOW-LABEL: func.func @step
// SLOW: %[[A1:.*]] = linalg.matmul ins(%arg0, %arg0
// SLOW-NEXT: %[[A2:.*]] = linalg.matmul ins(%[[A1]], %arg0
// SLOW-NEXT: %[[O:.*]] = dc.offload_start %[[A1]] : tensor<64x64xf32>
// SLOW-NEXT: linalg.matmul
// SLOW-NEXT: linalg.matmul
// SLOW-NEXT: %[[H:.*]] = dc.wait %[[O]] : !dc.future<!dc.host<tensor<64x64xf32>>>
// SLOW: %[[L:.*]] = dc.reload_start %[[H]] : !dc.host<tensor<64x64xf32>>
// SLOW-NEXT: linalg.matmul
// SLOW-NEXT: arith.mulf
// SLOW-NEXT: %[[G1:.*]] = linalg.matmul
// SLOW-NEXT: %[[BACK:.*]] = dc.wait %[[L]] : !dc.future<tensor<64x64xf32>>
// SLOW-NEXT: arith.mulf %[[G1]], %[[BACK]]
// SLOW-REPORT: host copies (busy)         0.033 ms   exposed      0.000 ms (  0.0% of the step)

// At 70 KiB a1 and a2 both go; a3, idle for less, stays.
// ALL-LABEL: func.func @step
// ALL: %[[A1:.*]] = linalg.matmul ins(%arg0, %arg0
// ALL-NEXT: %[[A2:.*]] = linalg.matmul ins(%[[A1]], %arg0
// ALL-NEXT: dc.offload_start %[[A1]]
// ALL-NEXT: %[[A3:.*]] = linalg.matmul ins(%[[A2]], %arg0
// ALL-NEXT: dc.offload_start %[[A2]]
// ALL-NOT: dc.offload_start %[[A3]]
// ALL: %[[BACK2:.*]] = dc.wait %{{.*}} : !dc.future<tensor<64x64xf32>>
// ALL-NEXT: arith.mulf %{{.*}}, %[[BACK2]]
// ALL-NEXT: dc.release %[[BACK2]] : tensor<64x64xf32>
// ALL: %[[BACK1:.*]] = dc.wait %{{.*}} : !dc.future<tensor<64x64xf32>>
// ALL-NEXT: arith.mulf %{{.*}}, %[[BACK1]]
// ALL-NEXT: dc.release %[[BACK1]] : tensor<64x64xf32>
// ALL-NOT: dc.release

// REPORT: host copies (busy)         0.066 ms   exposed      0.000 ms (  0.0% of the step)
// REPORT-NOT: copies slow compute
// REPORT: peak device memory    64.25 KiB (65792 B) of budget 70.00 KiB (71680 B)
// REPORT: peak host memory      32.00 KiB (32768 B)

// The same placement on a target where each copy direction stretches the
// compute beside it by half (copyComputeSlowdown 0.5, else the toy
// target): the four 16 KiB copies (65.5 us) all run beside compute, which
// does 1/1.5 of its work meanwhile: 65.5 / 3 = 21.8 us more.
// SLOWED: predicted step             3.700 ms
// SLOWED-NEXT: compute (busy)             3.700 ms
// SLOWED: host copies (busy)         0.066 ms   exposed      0.000 ms
// SLOWED-NEXT: copies slow compute        0.022 ms   (compute overlapping host copies, part of compute busy)

// Keeping the last two candidates on the device leaves only a1: not enough.
// KEEP: error: device memory peaks here at 80.25 KiB (82176 B) and no activation idle across this point can be offloaded; the budget of 70.00 KiB (71680 B) is short by 10.25 KiB (10496 B)

// FLOOR: error: memory budget 60.00 KiB (61440 B) is below this step's floor of 64.00 KiB (65536 B)

func.func @step(%x: tensor<64x64xf32>) -> (tensor<64xf32> {dc.loss}, tensor<64xf32>) {
  %e = tensor.empty() : tensor<64x64xf32>
  %r = tensor.empty() : tensor<64xf32>
  // Forward: three 16 KiB activations, each read again in backward.
  %a1 = linalg.matmul ins(%x, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %a2 = linalg.matmul ins(%a1, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %a3 = linalg.matmul ins(%a2, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %out = linalg.matmul ins(%a3, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %loss = linalg.reduce ins(%out : tensor<64x64xf32>) outs(%r : tensor<64xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  // Backward: reads them again in reverse order.
  %g3 = linalg.matmul ins(%out, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %h3 = arith.mulf %g3, %a3 : tensor<64x64xf32>
  %g2 = linalg.matmul ins(%h3, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %h2 = arith.mulf %g2, %a2 : tensor<64x64xf32>
  %g1 = linalg.matmul ins(%h2, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %h1 = arith.mulf %g1, %a1 : tensor<64x64xf32>
  %grad = linalg.reduce ins(%h1 : tensor<64x64xf32>) outs(%r : tensor<64xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  return %loss, %grad : tensor<64xf32>, tensor<64xf32>
}
