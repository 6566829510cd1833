// RUN: dc-opt %s --dc-attach-target="target=%S/Inputs/toy-slow-link-target.json memory-budget=100KiB" --dc-offload-activations="min-bytes=1024" --dc-attach-target=memory-budget=100KiB --dc-verify-schedule | FileCheck %s
// RUN: dc-opt %s --dc-attach-target="target=%S/Inputs/toy-slow-link-target.json memory-budget=100KiB" --dc-offload-activations="min-bytes=1024" --dc-report -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: dc-opt %s --dc-attach-target="target=%S/Inputs/toy-slow-link-target.json memory-budget=100KiB" --dc-report -o /dev/null | FileCheck %s --check-prefix=BEFORE

// The step already fits, with one offload placed badly (as after passes that
// changed the timing: prefetch, selective gather): its wait right behind
// the copy and its reload right after. The pass offloads nothing more and
// re-times what is there. On the slow link a 16 KiB copy takes 1.09 ms, a
// matmul 0.52 ms.
// BEFORE: host copies (busy)         2.185 ms   exposed      1.092 ms

// The wait goes down to the end of the forward (the copy ends 0.04 ms after
// it: waiting later would push the reload, which must start before g3 to
// be back for g1's use, three ops later); the reload stays just after it.
// CHECK-LABEL: func.func @step
// CHECK: %[[O:.*]] = dc.offload_start %{{.*}} : tensor<64x64xf32>
// CHECK-NEXT: %[[A3:.*]] = linalg.matmul
// CHECK-NEXT: %[[OUT:.*]] = linalg.matmul ins(%[[A3]]
// CHECK-NEXT: linalg.reduce
// CHECK: %[[H:.*]] = dc.wait %[[O]]
// CHECK-NEXT: %[[R:.*]] = dc.reload_start %[[H]]
// CHECK-NEXT: linalg.matmul ins(%[[OUT]]
// CHECK-NOT: dc.offload_start
// CHECK: %[[BACK:.*]] = dc.wait %[[R]]
// CHECK-NEXT: arith.mulf %{{.*}}, %[[BACK]]
// REPORT: host copies (busy)         2.185 ms   exposed      0.040 ms

func.func @step(%x: tensor<64x64xf32>) -> (tensor<64xf32> {dc.loss}, tensor<64xf32>) {
  %e = tensor.empty() : tensor<64x64xf32>
  %r = tensor.empty() : tensor<64xf32>
  %a1 = linalg.matmul ins(%x, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %a2 = linalg.matmul ins(%a1, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %off = dc.offload_start %a1 : tensor<64x64xf32>
  %host = dc.wait %off : !dc.future<!dc.host<tensor<64x64xf32>>>
  %rel = dc.reload_start %host : !dc.host<tensor<64x64xf32>>
  %a3 = linalg.matmul ins(%a2, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %out = linalg.matmul ins(%a3, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %loss = linalg.reduce ins(%out : tensor<64x64xf32>) outs(%r : tensor<64xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  %g3 = linalg.matmul ins(%out, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %h3 = arith.mulf %g3, %a3 : tensor<64x64xf32>
  %g2 = linalg.matmul ins(%h3, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %h2 = arith.mulf %g2, %a2 : tensor<64x64xf32>
  %g1 = linalg.matmul ins(%h2, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %a1b = dc.wait %rel : !dc.future<tensor<64x64xf32>>
  %h1 = arith.mulf %g1, %a1b : tensor<64x64xf32>
  %grad = linalg.reduce ins(%h1 : tensor<64x64xf32>) outs(%r : tensor<64xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  return %loss, %grad : tensor<64xf32>, tensor<64xf32>
}
