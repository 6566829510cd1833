// RUN: dc-opt %s --dc-attach-target="target=%S/Inputs/toy-target.json memory-budget=84KiB" --dc-offload-activations="min-bytes=1024 check-timeline-edits=true" --dc-attach-target=memory-budget=84KiB --dc-verify-schedule | FileCheck %s
// RUN: dc-opt %s --dc-attach-target="target=%S/Inputs/toy-target.json memory-budget=84KiB" --dc-rematerialize="min-bytes=1024" --dc-attach-target=memory-budget=84KiB --dc-verify-schedule | FileCheck %s --check-prefix=RECOMPUTE
// RUN: dc-opt %s --dc-attach-target="target=%S/Inputs/toy-target.json memory-budget=84KiB" --dc-rematerialize="min-bytes=1024" --dc-report -o /dev/null | FileCheck %s --check-prefix=REPORT

// A buffer read after its gap only through views (a fused projection read
// as its slices: the q/k/v of attention once the GPU targets fold its head
// transposes) is offloaded or recomputed whole, from the value that
// allocates it, and its later reads take the same views of the reloaded
// or recomputed value. Neither view is a candidate of its own: one frees
// nothing while the other still reads the buffer.

// CHECK-LABEL: func.func @step
// CHECK: %[[A1:.*]] = linalg.matmul ins(%arg0, %arg0
// CHECK: %[[O:.*]] = dc.offload_start %[[A1]] : tensor<64x64xf32>
// CHECK-NOT: dc.offload_start
// CHECK: %[[H:.*]] = dc.wait %[[O]]
// CHECK: %[[L:.*]] = dc.reload_start %[[H]]
// CHECK: %[[G2:.*]] = linalg.matmul
// CHECK: %[[GT:.*]] = tensor.extract_slice %[[G2]][0, 0]
// CHECK: %[[GB:.*]] = tensor.extract_slice %[[G2]][32, 0]
// CHECK: %[[BACK:.*]] = dc.wait %[[L]] : !dc.future<tensor<64x64xf32>>
// CHECK-NEXT: %[[TOP:.*]] = tensor.extract_slice %[[BACK]][0, 0] [32, 64] [1, 1]
// CHECK-NEXT: %[[BOTTOM:.*]] = tensor.extract_slice %[[BACK]][32, 0] [32, 64] [1, 1]
// CHECK-NEXT: arith.mulf %[[GT]], %[[TOP]]
// CHECK-NEXT: arith.mulf %[[GB]], %[[BOTTOM]]
// CHECK-NEXT: dc.release %[[BACK]]

// RECOMPUTE-LABEL: func.func @step
// RECOMPUTE: %[[G2:.*]] = linalg.matmul
// RECOMPUTE: %[[A1:.*]] = linalg.matmul {dc.recompute = [[ID:[0-9]+]] : i64} ins(%arg0, %arg0
// RECOMPUTE-NEXT: %[[TOP:.*]] = tensor.extract_slice %[[A1]][0, 0] [32, 64] [1, 1] {dc.recompute = [[ID]] : i64}
// RECOMPUTE-NEXT: %[[BOTTOM:.*]] = tensor.extract_slice %[[A1]][32, 0] [32, 64] [1, 1] {dc.recompute = [[ID]] : i64}
// RECOMPUTE-NEXT: arith.mulf %{{.*}}, %[[TOP]]
// RECOMPUTE-NEXT: arith.mulf %{{.*}}, %[[BOTTOM]]

// dc-report names the recomputed buffer (the product, 16 KiB), not the
// last view made of its clone.
// REPORT: recomputed activations 1, 16.00 KiB (16384 B)
// REPORT: recomputed tensor<64x64xf32> 16384 {{.*}} linalg.matmul

func.func @step(%x: tensor<64x64xf32>) -> (tensor<64xf32> {dc.loss}, tensor<32x64xf32>, tensor<32x64xf32>) {
  %e = tensor.empty() : tensor<64x64xf32>
  %r = tensor.empty() : tensor<64xf32>
  // Forward: a1, read again in backward through its two halves.
  %a1 = linalg.matmul ins(%x, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %top = tensor.extract_slice %a1[0, 0] [32, 64] [1, 1] : tensor<64x64xf32> to tensor<32x64xf32>
  %bottom = tensor.extract_slice %a1[32, 0] [32, 64] [1, 1] : tensor<64x64xf32> to tensor<32x64xf32>
  %a2 = linalg.matmul ins(%a1, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %a3 = linalg.matmul ins(%a2, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %out = linalg.matmul ins(%a3, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %loss = linalg.reduce ins(%out : tensor<64x64xf32>) outs(%r : tensor<64xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  // Backward: a3 and a2 read directly, a1 through its halves.
  %g3 = linalg.matmul ins(%out, %a3 : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %g2 = linalg.matmul ins(%g3, %a2 : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %gt = tensor.extract_slice %g2[0, 0] [32, 64] [1, 1] : tensor<64x64xf32> to tensor<32x64xf32>
  %gb = tensor.extract_slice %g2[32, 0] [32, 64] [1, 1] : tensor<64x64xf32> to tensor<32x64xf32>
  %ht = arith.mulf %gt, %top : tensor<32x64xf32>
  %hb = arith.mulf %gb, %bottom : tensor<32x64xf32>
  return %loss, %ht, %hb : tensor<64xf32>, tensor<32x64xf32>, tensor<32x64xf32>
}
