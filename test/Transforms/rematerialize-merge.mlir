// RUN: dc-opt %s --dc-attach-target="target=cpu memory-budget=136KiB" --dc-rematerialize="min-bytes=1024" --dc-attach-target=memory-budget=136KiB --dc-verify-schedule | FileCheck %s
// RUN: dc-opt %s --dc-attach-target="target=cpu memory-budget=136KiB" --dc-rematerialize="min-bytes=1024 merge-siblings=false" | FileCheck %s --check-prefix=APART
// RUN: dc-opt %s --dc-attach-target="target=cpu memory-budget=136KiB" --dc-rematerialize="min-bytes=1024" --dc-report -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: dc-opt %s --dc-attach-target="target=cpu memory-budget=136KiB" --dc-rematerialize="min-bytes=1024 leave-to-offload=true" --dc-offload-activations="min-bytes=1024 check-timeline-edits=true" | FileCheck %s --check-prefix=LINK
// RUN: dc-opt %s --dc-attach-target="target=%S/Inputs/cpu-copies-slow-compute-target.json memory-budget=136KiB" --dc-rematerialize="min-bytes=1024 leave-to-offload=true" --dc-offload-activations="min-bytes=1024" | FileCheck %s --check-prefix=SLOWED

// A SwiGLU-like block: a = g * u is read by the forward's product p and,
// after the 144 KiB peak at `big`, by the weight gradient dw; the backward's
// elementwise dg reads g and u (and dact) three ops later. With the budget
// 8 KiB under the peak, a (elementwise, the cheapest per byte) is dropped
// and made as a second result of dg, from the g and u it reads anyway; dw
// (and the fill of its output, made for it alone) move right after it,
// where nothing in between needed dw. Merged, the recomputation costs what
// the extra result's bytes do (1.0 us on the cpu preset, against 3.5 us
// for a clone on its own).
// CHECK-LABEL: func.func @step
// CHECK: %[[G:.*]] = linalg.matmul ins(%arg0, %arg1
// CHECK: %[[U:.*]] = linalg.matmul ins(%arg0, %arg2
// CHECK: %[[DACT:.*]] = linalg.matmul ins(%{{[0-9]+}}, %arg2
// CHECK-NOT: linalg.matmul
// CHECK: %[[E:.*]] = tensor.empty() {dc.recompute = [[ID:[0-9]+]] : i64}
// CHECK: %[[M:.*]]:2 = linalg.generic {{.*}} ins(%[[DACT]], %[[G]], %[[U]] : {{.*}}) outs(%{{.*}}, %[[E]] : {{.*}}) attrs = {dc.recompute = [[ID]] : i64, dc.recomputed_results = 1 : i64}
// CHECK: ^bb0(%[[D:.*]]: f32, %[[GV:.*]]: f32, %[[UV:.*]]: f32, %{{.*}}: f32, %{{.*}}: f32):
// CHECK: %[[T:.*]] = arith.addf
// CHECK: %[[A:.*]] = arith.mulf %[[GV]], %[[UV]] : f32
// CHECK: linalg.yield %[[T]], %[[A]] : f32, f32
// CHECK: %[[F:.*]] = linalg.fill
// CHECK-NEXT: %[[DW:.*]] = linalg.matmul ins(%[[M]]#1, %arg2 {{.*}} outs(%[[F]] :
// CHECK-NEXT: return %[[DW]], %[[M]]#0

// Where an op between dw and dg reads dw, dw cannot move after dg: a is
// cloned on its own right before dw.
// CHECK-LABEL: func.func @blocked
// CHECK: tensor.empty() {dc.recompute = [[ID2:[0-9]+]] : i64}
// CHECK: %[[A2:.*]] = linalg.generic {{.*}} attrs = {dc.recompute = [[ID2]] : i64}
// CHECK: linalg.yield
// CHECK-NEXT: } -> tensor<64x64xf32>
// CHECK-NEXT: linalg.matmul ins(%[[A2]], %arg2
// CHECK-NOT: dc.recomputed_results

// APART-LABEL: func.func @step
// APART-NOT: dc.recomputed_results
// APART: %[[A:.*]] = linalg.generic {{.*}} attrs = {dc.recompute = {{[0-9]+}} : i64}
// APART: linalg.yield
// APART-NEXT: } -> tensor<64x64xf32>
// APART-NEXT: %[[DW:.*]] = linalg.matmul ins(%[[A]], %arg2
// APART-NOT: dc.recompute
// APART: return

// Joint with offload: where the host link hides the 8 KiB excess, offload
// takes it (the LINK run). Where copies slow the compute beside them (the
// SLOWED run, by half per direction), a recomputation that costs less than
// the two copies would add is still made: the merged one (1.0 us), not the
// clone on its own in @blocked (3.5 us), which is offloaded.
// LINK-LABEL: func.func @step
// LINK-NOT: dc.recompute
// LINK: dc.offload_start
// LINK-LABEL: func.func @blocked
// LINK-NOT: dc.recompute
// LINK: dc.offload_start
// SLOWED-LABEL: func.func @step
// SLOWED-NOT: dc.offload_start
// SLOWED: dc.recomputed_results = 1
// SLOWED-NOT: dc.offload_start
// SLOWED-LABEL: func.func @blocked
// SLOWED-NOT: dc.recompute
// SLOWED: dc.offload_start

// The report counts the merged op's share of its bytes that the recomputed
// result writes (1 of 5 tensors of 16 KiB) as the recomputation's time.
// REPORT-LABEL: dc-report @step
// REPORT: recomputed activations 1, 16.00 KiB (16384 B)
// REPORT: recomputed tensor<64x64xf32> 16384 1.0 0.0 linalg.generic
#rc = affine_map<(i, j) -> (i, j)>
#kij = affine_map<(k, i, j) -> (k, i, j)>
#ij = affine_map<(k, i, j) -> (i, j)>
func.func @step(%x: tensor<64x64xf32>, %w: tensor<64x64xf32>, %w2: tensor<64x64xf32>) -> (tensor<64x64xf32>, tensor<64x64xf32>) {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<64x64xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %g = linalg.matmul ins(%x, %w : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f0 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %e1 = tensor.empty() : tensor<64x64xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %u = linalg.matmul ins(%x, %w2 : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f1 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %e2 = tensor.empty() : tensor<64x64xf32>
  %a = linalg.generic {indexing_maps = [#rc, #rc, #rc], iterator_types = ["parallel", "parallel"]}
      ins(%g, %u : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e2 : tensor<64x64xf32>) {
  ^bb0(%gv: f32, %uv: f32, %o: f32):
    %y = arith.mulf %gv, %uv : f32
    linalg.yield %y : f32
  } -> tensor<64x64xf32>
  %e3 = tensor.empty() : tensor<64x64xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %p = linalg.matmul ins(%a, %w : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f3 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %e4 = tensor.empty() : tensor<2x64x64xf32>
  %big = linalg.generic {indexing_maps = [#ij, #kij], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%p : tensor<64x64xf32>) outs(%e4 : tensor<2x64x64xf32>) {
  ^bb0(%v: f32, %o: f32):
    %y = math.exp %v : f32
    linalg.yield %y : f32
  } -> tensor<2x64x64xf32>
  %e5 = tensor.empty() : tensor<64x64xf32>
  %f5 = linalg.fill ins(%zero : f32) outs(%e5 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %s = linalg.generic {indexing_maps = [#kij, #ij], iterator_types = ["reduction", "parallel", "parallel"]}
      ins(%big : tensor<2x64x64xf32>) outs(%f5 : tensor<64x64xf32>) {
  ^bb0(%v: f32, %o: f32):
    %y = arith.addf %v, %o : f32
    linalg.yield %y : f32
  } -> tensor<64x64xf32>
  %e6 = tensor.empty() : tensor<64x64xf32>
  %f6 = linalg.fill ins(%zero : f32) outs(%e6 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %dw = linalg.matmul ins(%a, %w2 : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f6 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %e7 = tensor.empty() : tensor<64x64xf32>
  %f7 = linalg.fill ins(%zero : f32) outs(%e7 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %dact = linalg.matmul ins(%s, %w2 : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f7 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %e8 = tensor.empty() : tensor<64x64xf32>
  %dg = linalg.generic {indexing_maps = [#rc, #rc, #rc, #rc], iterator_types = ["parallel", "parallel"]}
      ins(%dact, %g, %u : tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>) outs(%e8 : tensor<64x64xf32>) {
  ^bb0(%d: f32, %gv: f32, %uv: f32, %o: f32):
    %y = arith.mulf %d, %uv : f32
    %z = arith.mulf %d, %gv : f32
    %t = arith.addf %y, %z : f32
    linalg.yield %t : f32
  } -> tensor<64x64xf32>
  return %dw, %dg : tensor<64x64xf32>, tensor<64x64xf32>
}

func.func @blocked(%x: tensor<64x64xf32>, %w: tensor<64x64xf32>, %w2: tensor<64x64xf32>) -> (tensor<64x64xf32>, tensor<64x64xf32>) {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<64x64xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %g = linalg.matmul ins(%x, %w : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f0 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %e1 = tensor.empty() : tensor<64x64xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %u = linalg.matmul ins(%x, %w2 : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f1 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %e2 = tensor.empty() : tensor<64x64xf32>
  %a = linalg.generic {indexing_maps = [#rc, #rc, #rc], iterator_types = ["parallel", "parallel"]}
      ins(%g, %u : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e2 : tensor<64x64xf32>) {
  ^bb0(%gv: f32, %uv: f32, %o: f32):
    %y = arith.mulf %gv, %uv : f32
    linalg.yield %y : f32
  } -> tensor<64x64xf32>
  %e3 = tensor.empty() : tensor<64x64xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %p = linalg.matmul ins(%a, %w : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f3 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %e4 = tensor.empty() : tensor<2x64x64xf32>
  %big = linalg.generic {indexing_maps = [#ij, #kij], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%p : tensor<64x64xf32>) outs(%e4 : tensor<2x64x64xf32>) {
  ^bb0(%v: f32, %o: f32):
    %y = math.exp %v : f32
    linalg.yield %y : f32
  } -> tensor<2x64x64xf32>
  %e5 = tensor.empty() : tensor<64x64xf32>
  %f5 = linalg.fill ins(%zero : f32) outs(%e5 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %s = linalg.generic {indexing_maps = [#kij, #ij], iterator_types = ["reduction", "parallel", "parallel"]}
      ins(%big : tensor<2x64x64xf32>) outs(%f5 : tensor<64x64xf32>) {
  ^bb0(%v: f32, %o: f32):
    %y = arith.addf %v, %o : f32
    linalg.yield %y : f32
  } -> tensor<64x64xf32>
  %e6 = tensor.empty() : tensor<64x64xf32>
  %f6 = linalg.fill ins(%zero : f32) outs(%e6 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %dw = linalg.matmul ins(%a, %w2 : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f6 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %e7 = tensor.empty() : tensor<64x64xf32>
  %f7 = linalg.fill ins(%zero : f32) outs(%e7 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %dact = linalg.matmul ins(%s, %w2 : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f7 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %e9 = tensor.empty() : tensor<64x64xf32>
  %dw2 = linalg.generic {indexing_maps = [#rc, #rc], iterator_types = ["parallel", "parallel"]}
      ins(%dw : tensor<64x64xf32>) outs(%e9 : tensor<64x64xf32>) {
  ^bb0(%v: f32, %o: f32):
    %y = arith.negf %v : f32
    linalg.yield %y : f32
  } -> tensor<64x64xf32>
  %e8 = tensor.empty() : tensor<64x64xf32>
  %dg = linalg.generic {indexing_maps = [#rc, #rc, #rc, #rc], iterator_types = ["parallel", "parallel"]}
      ins(%dact, %g, %u : tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>) outs(%e8 : tensor<64x64xf32>) {
  ^bb0(%d: f32, %gv: f32, %uv: f32, %o: f32):
    %y = arith.mulf %d, %uv : f32
    %z = arith.mulf %d, %gv : f32
    %t = arith.addf %y, %z : f32
    linalg.yield %t : f32
  } -> tensor<64x64xf32>
  return %dw2, %dg : tensor<64x64xf32>, tensor<64x64xf32>
}
