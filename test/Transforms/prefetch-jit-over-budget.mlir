// RUN: dc-opt %s --dc-zero3="world-size=2" --dc-attach-target="target=%S/Inputs/toy-target.json memory-budget=5KiB" --dc-prefetch -verify-diagnostics -o /dev/null
// RUN: dc-opt %s --dc-zero3="world-size=2" --dc-attach-target="target=%S/Inputs/toy-target.json memory-budget=6KiB" --dc-prefetch --dc-attach-target=memory-budget=6KiB --dc-verify-schedule | FileCheck %s

// A budget at or above the step's floor that even just-in-time gathers
// exceed. Live for the whole step: the two 512 B shards and x (1 KiB): 2
// KiB (the returned sum, made last, only from there). The floor adds the
// largest single op's own buffers, the second matmul's h0, gathered w1 and
// h1: 5 KiB. But %a, made before the matmuls and read only after them, is
// live too while the second matmul runs: the just-in-time peak is 6 KiB,
// there. A 5 KiB budget passes the floor check and fails this one.

// At exactly 6 KiB (the peak) the step fits and dc-verify-schedule proves
// it: w1's gather hides behind the first matmul (5 KiB live there, 6 KiB
// with it), w0's goes to the top.
// CHECK-LABEL: func.func @keep
// CHECK-NEXT: dc.gather_start %arg0
// CHECK-NEXT: arith.addf
// CHECK: %[[G1:.*]] = dc.gather_start %arg1
// CHECK-NEXT: linalg.matmul
// CHECK-NEXT: dc.release
// CHECK-NEXT: dc.wait %[[G1]]
// CHECK-NEXT: linalg.matmul
func.func @keep(%w0: tensor<16x16xf32> {dc.param = #dc.param<id = 0>},
                %w1: tensor<16x16xf32> {dc.param = #dc.param<id = 1>},
                %x: tensor<16x16xf32>) -> (tensor<16x16xf32> {dc.loss}) {
  %a = arith.addf %x, %x : tensor<16x16xf32>
  %e = tensor.empty() : tensor<16x16xf32>
  %h0 = linalg.matmul ins(%x, %w0 : tensor<16x16xf32>, tensor<16x16xf32>) outs(%e : tensor<16x16xf32>) -> tensor<16x16xf32>
  // expected-error @+1 {{even gathering just in time, device memory peaks here at 6.00 KiB (6144 B); the budget of 5.00 KiB (5120 B) is short by 1.00 KiB (1024 B)}}
  %h1 = linalg.matmul ins(%h0, %w1 : tensor<16x16xf32>, tensor<16x16xf32>) outs(%e : tensor<16x16xf32>) -> tensor<16x16xf32>
  %s = arith.addf %a, %h1 : tensor<16x16xf32>
  return %s : tensor<16x16xf32>
}
