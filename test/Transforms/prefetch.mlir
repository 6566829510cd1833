// RUN: dc-opt %s --dc-zero3="world-size=2" --dc-attach-target=target=%S/Inputs/toy-target.json --dc-prefetch="max-fused-bytes=0" --dc-attach-target --dc-verify-schedule | FileCheck %s
// RUN: dc-opt %s --dc-zero3="world-size=2" --dc-attach-target="target=%S/Inputs/toy-target.json memory-budget=6144" --dc-prefetch="max-fused-bytes=0" --dc-attach-target=memory-budget=6144 --dc-verify-schedule | FileCheck %s --check-prefix=TIGHT
// RUN: dc-opt %s --dc-zero3="world-size=2" --dc-attach-target=target=%S/Inputs/toy-latency-target.json --dc-prefetch --dc-attach-target --dc-verify-schedule | FileCheck %s --check-prefix=FUSE
// RUN: dc-opt %s --dc-zero3="world-size=2" --dc-attach-target=target=%S/Inputs/toy-target.json --dc-prefetch | FileCheck %s --check-prefix=NOFUSE
// RUN: dc-opt %s --dc-zero3="world-size=2" --dc-attach-target="target=%S/Inputs/toy-target.json memory-budget=5000" --dc-prefetch -verify-diagnostics -o /dev/null

// Four chained 16x16 f32 matmuls. On the toy target a matmul takes 8.2 us
// and gathering one 1 KiB weight over 2 ranks takes 1 + 5.12 us, so each
// gather hides behind the matmul before it.
// CHECK-LABEL: func.func @chain
// CHECK: %[[G0:.*]] = dc.gather_start %arg0
// CHECK: %[[W0:.*]] = dc.wait %[[G0]]
// CHECK-NEXT: %[[G1:.*]] = dc.gather_start %arg1
// CHECK-NEXT: linalg.matmul ins(%arg4, %[[W0]]
// CHECK-NEXT: dc.release %[[W0]]
// CHECK-NEXT: %[[W1:.*]] = dc.wait %[[G1]]
// CHECK-NEXT: %[[G2:.*]] = dc.gather_start %arg2
// CHECK-NEXT: linalg.matmul ins(%{{.*}}, %[[W1]]
// CHECK-NEXT: dc.release %[[W1]]
// CHECK-NEXT: %[[W2:.*]] = dc.wait %[[G2]]
// CHECK-NEXT: %[[G3:.*]] = dc.gather_start %arg3
// CHECK-NEXT: linalg.matmul ins(%{{.*}}, %[[W2]]

// At a 6 KiB budget -- the just-in-time peak, reached at every matmul --
// a gather may only move above ops where memory is below the peak: the
// second moves above the first matmul (whose input is an argument), the
// later ones only above the previous release, not the matmul.
// TIGHT-LABEL: func.func @chain
// TIGHT: %[[G1:.*]] = dc.gather_start %arg1
// TIGHT-NEXT: linalg.matmul
// TIGHT: linalg.matmul
// TIGHT-NEXT: %[[G2:.*]] = dc.gather_start %arg2
// TIGHT-NEXT: dc.release
// TIGHT-NEXT: dc.wait %[[G2]]

// With a 20 us collective latency one transfer of all four weights
// (20 + 20.48 us) beats four (4 x 25.12 us): one group.
// FUSE-LABEL: func.func @chain
// FUSE: %[[G:.*]]:4 = dc.gather_start %arg0, %arg1, %arg2, %arg3
// FUSE-NOT: dc.gather_start
// FUSE: dc.wait %[[G]]#0
// FUSE: dc.wait %[[G]]#1
// FUSE: dc.wait %[[G]]#2
// FUSE: dc.wait %[[G]]#3

// With a 1 us latency fusing would delay each group's wait: no fusion.
// NOFUSE-COUNT-4: dc.gather_start %arg{{[0-3]}} :

// expected-error @+1 {{memory budget 4.88 KiB (5000 B) is below this step's floor of 6.00 KiB (6144 B) (arguments plus the largest single op)}}
func.func @chain(%w0: tensor<16x16xf32> {dc.param = #dc.param<id = 0>},
                 %w1: tensor<16x16xf32> {dc.param = #dc.param<id = 1>},
                 %w2: tensor<16x16xf32> {dc.param = #dc.param<id = 2>},
                 %w3: tensor<16x16xf32> {dc.param = #dc.param<id = 3>},
                 %x: tensor<16x16xf32>) -> (tensor<16x16xf32> {dc.loss}) {
  %e = tensor.empty() : tensor<16x16xf32>
  %h0 = linalg.matmul ins(%x, %w0 : tensor<16x16xf32>, tensor<16x16xf32>) outs(%e : tensor<16x16xf32>) -> tensor<16x16xf32>
  %h1 = linalg.matmul ins(%h0, %w1 : tensor<16x16xf32>, tensor<16x16xf32>) outs(%e : tensor<16x16xf32>) -> tensor<16x16xf32>
  %h2 = linalg.matmul ins(%h1, %w2 : tensor<16x16xf32>, tensor<16x16xf32>) outs(%e : tensor<16x16xf32>) -> tensor<16x16xf32>
  %h3 = linalg.matmul ins(%h2, %w3 : tensor<16x16xf32>, tensor<16x16xf32>) outs(%e : tensor<16x16xf32>) -> tensor<16x16xf32>
  return %h3 : tensor<16x16xf32>
}
