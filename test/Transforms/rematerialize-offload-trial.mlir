// RUN: dc-opt %s --dc-attach-target="target=%S/Inputs/toy-target.json memory-budget=84KiB" --dc-rematerialize="min-bytes=1024 leave-to-offload=true" --dc-offload-activations="min-bytes=1024" --dc-attach-target=memory-budget=84KiB --dc-verify-schedule | FileCheck %s
// RUN: dc-opt %s --mlir-disable-threading --dc-attach-target="target=%S/Inputs/toy-target.json memory-budget=84KiB" --dc-rematerialize="min-bytes=1024 leave-to-offload=true" --dc-offload-activations="min-bytes=1024" --dc-attach-target=memory-budget=84KiB --dc-verify-schedule | FileCheck %s
// RUN: not dc-opt %s --dc-attach-target="target=%S/Inputs/toy-target.json memory-budget=84KiB" --dc-offload-activations="min-bytes=1024" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ALONE

// (The second run places the tried recomputations' offloads one after
// another instead of on the context's threads: the same plan.)
// a = exp(x) is made first and b = exp(m6) after six products (3 ms on the
// toy target), both read only by the last op, which writes s over q (80 KiB
// live there: the step's floor stays below the peak); the step peaks at 96
// KiB after b. By the offload floor the host link (1 GB/s) could take the
// 12 KiB over an 84 KiB budget without a stall: it has had 3 ms since a was
// made. dc-offload-activations' own placement cannot fit the step at all
// (the reloads of a and b peak again before the last op), so offload alone
// is an error; it once looped forever, moving the two reloads after each
// other in turn.
// ALONE: error: device memory peaks here at 96.00 KiB (98304 B) and no activation idle across this point can be offloaded

// With dc-rematerialize leaving the rest to offload, the floor says offload
// can hide it, but dc-rematerialize tries the placement on a copy of the
// step first: it fails, so it tries recomputing each of the tensors made
// last instead and keeps the one whose recomputation and placement add the
// least: a (4 us), and nothing is offloaded.
// CHECK-LABEL: func.func @step
// CHECK-NOT: dc.offload_start
// CHECK: %[[E:.*]] = tensor.empty() {dc.recompute = {{[0-9]+}} : i64}
// CHECK-NEXT: linalg.generic {{.*}} ins(%arg0 : tensor<64x64xf32>) outs(%[[E]] : {{.*}}dc.recompute
// CHECK-NEXT: ^bb0
// CHECK-NEXT: math.exp
// CHECK-NOT: dc.offload_start
#rc = affine_map<(i, j) -> (i, j)>
func.func @step(%x: tensor<64x64xf32>, %w: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %zero = arith.constant 0.0 : f32
  %ea = tensor.empty() : tensor<64x64xf32>
  %a = linalg.generic {indexing_maps = [#rc, #rc], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<64x64xf32>) outs(%ea : tensor<64x64xf32>) {
  ^bb0(%v: f32, %o: f32):
    %y = math.exp %v : f32
    linalg.yield %y : f32
  } -> tensor<64x64xf32>
  %e1 = tensor.empty() : tensor<64x64xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %m1 = linalg.matmul ins(%x, %w : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f1 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %e2 = tensor.empty() : tensor<64x64xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %m2 = linalg.matmul ins(%m1, %w : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f2 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %e3 = tensor.empty() : tensor<64x64xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %m3 = linalg.matmul ins(%m2, %w : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f3 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %e4 = tensor.empty() : tensor<64x64xf32>
  %f4 = linalg.fill ins(%zero : f32) outs(%e4 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %m4 = linalg.matmul ins(%m3, %w : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f4 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %e5 = tensor.empty() : tensor<64x64xf32>
  %f5 = linalg.fill ins(%zero : f32) outs(%e5 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %m5 = linalg.matmul ins(%m4, %w : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f5 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %e6 = tensor.empty() : tensor<64x64xf32>
  %f6 = linalg.fill ins(%zero : f32) outs(%e6 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %m6 = linalg.matmul ins(%m5, %w : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f6 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %eb = tensor.empty() : tensor<64x64xf32>
  %b = linalg.generic {indexing_maps = [#rc, #rc], iterator_types = ["parallel", "parallel"]}
      ins(%m6 : tensor<64x64xf32>) outs(%eb : tensor<64x64xf32>) {
  ^bb0(%v: f32, %o: f32):
    %y = math.exp %v : f32
    linalg.yield %y : f32
  } -> tensor<64x64xf32>
  %e7 = tensor.empty() : tensor<64x64xf32>
  %f7 = linalg.fill ins(%zero : f32) outs(%e7 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %p = linalg.matmul ins(%x, %w : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f7 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %e8 = tensor.empty() : tensor<64x64xf32>
  %f8 = linalg.fill ins(%zero : f32) outs(%e8 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %q = linalg.matmul ins(%p, %w : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f8 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %s = linalg.generic {indexing_maps = [#rc, #rc, #rc, #rc], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b, %q : tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>) outs(%q : tensor<64x64xf32>) {
  ^bb0(%u: f32, %v: f32, %t: f32, %o: f32):
    %y = arith.addf %u, %v : f32
    %z = arith.addf %y, %t : f32
    linalg.yield %z : f32
  } -> tensor<64x64xf32>
  return %s : tensor<64x64xf32>
}
